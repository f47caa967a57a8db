"""Ordered delivery: what an operator does to a stream, and how a stream is shown."""
