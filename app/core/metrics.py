"""Prometheus metrics.

Per-process counters and histograms live here (workers serve them on
HERALD_WORKER_METRICS_PORT). Fleet-wide gauges are computed from PostgreSQL when `/metrics` is
scraped on the API (see app/operations/service/fleet.py): queue depth alone is no answer,
the age of the oldest due work is. Every label has a fixed set of values (an outcome, a reason):
never an endpoint, tenant or delivery id, whose number grows with what tenants make (200,000
endpoints once made a 34 MB scrape). Per-endpoint figures are the API's: GET
/v1/endpoints/{id}/stats, and the console.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

ATTEMPTS = Counter("herald_attempts", "Delivery attempts recorded, by outcome class", ["outcome"])
ATTEMPT_SECONDS = Histogram(
    "herald_attempt_duration_seconds",
    "Duration of one HTTP attempt, connect to last byte read",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
DISPATCHES = Counter("herald_dispatches", "Attempts started")
DEFERRALS = Counter(
    "herald_flow_deferrals",
    "Deliveries deferred by per-destination flow control, by reason",
    ["reason"],
)
WAKEUPS = Counter("herald_wakeups", "Due destinations taken from the wake-up queue (one turn each)")
LEASES_LOST = Counter(
    "herald_leases_lost", "Results refused because the worker's lease had expired"
)
LEASES_GIVEN_BACK = Counter(
    "herald_leases_given_back",
    "Leases given back unsent: too little left of them to send on, or a start that missed its"
    " window in the rate (a late claim, a stall)",
)
RECONCILE_RUNS = Counter("herald_reconcile_runs", "Reconcile runs finished, by status", ["status"])
RECONCILE_ROWS = Counter(
    "herald_reconcile_rows", "Rows brought back (or purged) by reconcile, by category", ["category"]
)
CLAIMS = Counter("herald_claims", "Batch claims that leased at least one delivery or none")
CLAIMED_ROWS = Counter("herald_claimed_rows", "Deliveries leased by batch claims")
STREAMS_CONTINUED = Counter(
    "herald_streams_continued",
    "Ordered deliveries leased by the record that ended their stream's head and sent next by"
    " the same worker, without a wake-up or a claim",
)
RECORD_FLUSHES = Counter("herald_record_flushes", "Group commits of attempt outcomes")
CANCELLATIONS = Counter(
    "herald_cancellations",
    "Deliveries cancelled by their producer, by whether an attempt was in flight then",
    ["in_flight"],
)
PROGRAM_BUDGET_EXCEEDED = Counter(
    "herald_program_budget_exceeded",
    "Tenant programs not run (or stopped) because their bound on the event was over budget: "
    "program=filter (the endpoint is passed by, with the reason) or schema (the accept is 422)",
    ["program"],
)

# Each API process's view of the read replicas (app/core/replicas.py), served with the fleet
# gauges on the API's /metrics: whichever process answers the scrape probes them the same way.
REPLICAS = CollectorRegistry(auto_describe=False)
REPLICA_USABLE = Gauge(
    "herald_replica_usable",
    "1 while reads go to this replica; 0 while it is passed by (unreachable, promoted, behind)",
    ["replica"],
    registry=REPLICAS,
)
REPLICA_LAG = Gauge(
    "herald_replica_lag_seconds",
    "How far behind the primary the replica was at most, as of the last probe that reached it",
    ["replica"],
    registry=REPLICAS,
)
