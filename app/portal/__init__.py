"""The customer portal: what a tenant's customer sees of its own endpoints and deliveries,
embedded in the tenant's site (docs/decisions.md, on the customer portal)."""
