"""Unit tests: no server, no process, no network -- pure code, fast."""
