"""The engine's hot-path statements. The engine owns no table: it runs the delivery
workflow, so its statements live with it and span the tables the workflow touches --
delivery_leases.py claims ``deliveries`` (delivery's), reading ``endpoints`` and ``events``;
delivery_records.py records outcomes into ``deliveries`` and ``attempts`` (delivery's) and an
endpoint's health counters into ``endpoints`` (endpoints'), and, ending an ordered head, hands
its stream on in ``streams`` (streams') through the streams' own functions; polled_rows.py
reads and gives back in ``deliveries`` what polls read. Each is one
statement on a connection of its own (docs/architecture.md, "The transaction rule"); the
record's statements are PostgreSQL functions (migration 0041)."""
