"""The portal domain's SQL. It owns ``portal_sessions`` and ``portal_settings``, a module
each; ``portal_sessions.find`` and ``exchange`` read ``customers`` (a session ends with its
customer). Flush, never commit (docs/architecture.md)."""
