"""The operator console: server-rendered pages at /console, signed in with an API key
exchanged for a server-side session."""
