"""The catalogue's SQL. It owns ``event_types`` (event_types.py). Flush, never commit
(docs/architecture.md, "The transaction rule")."""
