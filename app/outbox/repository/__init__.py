"""The outbox's SQL. It owns ``outbox_wakeups`` (outbox.py), whose statements flush in the
caller's transaction -- but for the publish mark, a hot path: one statement on a connection of
its own (docs/architecture.md)."""
