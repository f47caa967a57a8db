"""The endpoints domain's SQL. It owns ``endpoints``: endpoints.py (the rows, narrowed by a
scope), destination_health.py (what the workers keep of an endpoint's health), sealed.py (the
sealed columns, for re-sealing); ``endpoints.in_scope`` reads ``customers`` (a customer sees
the endpoints of its current life only). Flush, never commit (docs/architecture.md)."""
