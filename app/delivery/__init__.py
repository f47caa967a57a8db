"""Accepting delivery intents and events, and telling anyone where a delivery stands."""
