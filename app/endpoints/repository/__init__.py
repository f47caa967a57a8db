"""The endpoints domain's SQL. It owns ``endpoints``: endpoints.py (the rows, narrowed by a
scope), destination_health.py (what the workers keep of an endpoint's health), sealed.py (the
sealed columns, for re-sealing). Flush, never commit (docs/architecture.md)."""
