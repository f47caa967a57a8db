"""The audit domain owns ``audit_records``."""
