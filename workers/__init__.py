"""arq-side processes: the outbox relay and the delivery workers (see issue 3)."""
