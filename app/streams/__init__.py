"""Ordered delivery: an endpoint's streams, their numbers and their heads. The
engine claims only heads; what ends a head hands its stream on (docs/decisions.md)."""
