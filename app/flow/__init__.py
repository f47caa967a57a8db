"""Flow control in Redis: per-destination rate and concurrency admission, wake-ups, pauses."""
