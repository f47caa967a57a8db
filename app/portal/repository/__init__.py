"""The portal domain's SQL. It owns ``portal_sessions`` and ``portal_settings``, a module
each; ``exchange`` reads ``customers`` and ``api_keys`` (a session ends with its customer, and
with the key that minted it), and ``list_page`` reads ``api_keys``. Who a session token is, the
tenants' domain reads (its ``customer_sessions``). Flush, never commit (docs/architecture.md)."""
