"""The outbox's SQL. It owns ``outbox`` (outbox.py), whose statements flush in the caller's
transaction -- but for the publish mark, a hot path: one statement on a connection of its own
that also moves the rows' ``deliveries`` (delivery's) to enqueued (docs/architecture.md)."""
