"""The delivery domain's SQL. It owns ``events``, ``deliveries``, ``attempts``,
``idempotency_keys``, ``custody_records`` and ``redrive_jobs``, a module for each (events.py,
deliveries.py, ...). intents.py is the accept's hot path: one statement that writes an event,
its deliveries and their ``outbox_wakeups`` (outbox's table) after reading ``endpoints``
(endpoints'), on a connection of its own. Others flush, never commit (docs/architecture.md)."""
