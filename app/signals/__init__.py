"""Operational signals: what happened to a tenant's endpoints and deliveries that Herald tells
the tenant about, as events of Herald's own (``herald.*``) to the tenant's operational
endpoints. Written in the transaction that made each thing happen -- by the triggers of
migration 0045 for the transitions many statements make (a delivery dead, an endpoint
disabled, failing or recovered, a stream halted), by the endpoints service for a caller's act
(an endpoint created, changed, deleted) -- and turned into events by the relay
(app/delivery/service/operational_events.py). A leaf: it imports no other domain."""
