"""Decisions and workflows. Takes a session or a sessionmaker and says which transaction it owns."""
