"""The portal domain's SQL. It owns ``portal_sessions`` and ``portal_settings``, a module
each; ``portal_sessions.find`` and ``exchange`` read ``customers`` and ``api_keys`` (a session
ends with its customer, and with the key that minted it), and ``list_page`` reads
``api_keys``. Flush, never commit (docs/architecture.md)."""
