"""The statements of ordered delivery. The streams domain owns ``streams``; its statements
also read and write the stream columns of ``deliveries`` (delivery's) -- numbering at accept
(a fragment of the accept's own statement), handing a stream on, requeue, release, reconcile's
mend -- and read an endpoint's ``on_dead`` and ``ordering`` from ``endpoints``."""
