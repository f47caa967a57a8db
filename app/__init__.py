"""Herald: webhook delivery that never loses an accepted intent."""

__version__ = "0.1.0"
