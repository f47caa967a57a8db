"""The delivery engine: take a destination's wake-up, claim its due deliveries, send them,
record the outcomes."""
