"""The tenants domain's SQL. It owns ``tenants``, ``api_keys`` and ``customers``, a module
each. Flush, never commit (docs/architecture.md)."""
