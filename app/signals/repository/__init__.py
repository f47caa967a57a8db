"""The signals domain owns ``operational_signals``; its triggers (migration 0045) read
``endpoints`` and ``tenants`` and fire on ``deliveries``, ``endpoints`` and ``streams``."""
