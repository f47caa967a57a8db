"""The statements of ordered delivery. The streams domain owns ``streams``; its statements
also read and write the stream columns of ``deliveries`` (delivery's) -- numbering at accept
(a fragment of the accept's own statement), handing a stream on, requeue, release, reconcile's
mend -- and read an endpoint's ``on_dead`` and ``ordering`` from ``endpoints``. The lock and
the hand-on are PostgreSQL functions (``lock_streams``, ``hand_on_streams``: migration 0041),
which the engine's ordered record calls too."""
