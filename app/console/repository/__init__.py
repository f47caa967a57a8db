"""The console's SQL. It owns ``console_sessions`` and ``console_secrets``; a session is
found only with its API key still live, so console_sessions.py reads ``api_keys`` (tenants')
in the same statement. Flush, never commit (docs/architecture.md)."""
