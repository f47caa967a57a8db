"""The event-type catalogue: the types a tenant publishes, described, each with an optional JSON
Schema that every payload of the type must match at accept."""
