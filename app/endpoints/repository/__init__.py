"""The endpoints domain's SQL. It owns ``endpoints`` (endpoints.py). Flush, never commit
(docs/architecture.md)."""
