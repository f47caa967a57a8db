"""Programs a tenant hands Herald, which Herald runs on the API's event loop: endpoint filters
(CEL, filters.py) and event-type payload schemas (JSON Schema, payload_schemas.py).

Each is code a tenant wrote running where every tenant's requests run, so none may cost more
than its budget (budget.py): its cost is bounded when it is saved, from the library's own parse
-- CEL's checked AST (filter_cost.py), the schema's graph (payload_schema_cost.py) -- and
worked out for each event before it runs. docs/decisions.md ("Tenant programs") says why the
bounds hold.
"""
