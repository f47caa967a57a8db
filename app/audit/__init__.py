"""The audit trail: every change to a tenant's configuration -- endpoints and their secrets,
keys, event types, customers, portal and tenant settings -- with who made it, when, and what it
was before and after (no secret's value, ever). Written in the change's own transaction,
listed by the API and the console, kept for HERALD_AUDIT_RETENTION_DAYS. The floor of the
domain services: the others write to it, it imports none of them."""
