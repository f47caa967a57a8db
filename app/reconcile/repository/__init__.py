"""Reconcile's SQL. It owns ``reconcile_runs`` (reconcile_runs.py); reconcile_scans.py
reads ``deliveries`` and ``endpoints`` (other domains') to find due and abandoned work. Flush,
never commit (docs/architecture.md)."""
