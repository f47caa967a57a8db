"""The transactional outbox: committed rows published to Redis, by the API's fast path and by
the relay."""
