"""The operations domain's SQL. It owns no table: retention.py purges what other domains own
(``deliveries``, ``events``, ``idempotency_keys``, ``reconcile_runs``, ``portal_sessions``,
``audit_records``) in
small batches, each flushed in a transaction the retention service opens (docs/architecture.md)."""
