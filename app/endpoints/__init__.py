"""Endpoints: where a tenant's deliveries go, their secrets, and what may be sent there."""
