"""The tenants domain's SQL. It owns ``tenants``, ``api_keys`` and ``customers``, a module
each; ``customer_sessions`` reads the portal's ``portal_sessions`` to say who a session token
is, as ``api_keys`` says who a key is. Flush, never commit (docs/architecture.md)."""
