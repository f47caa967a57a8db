"""The tenants domain's SQL. It owns ``tenants`` and ``api_keys``, a module each. Flush,
never commit (docs/architecture.md)."""
