"""operational signals

What happened to a tenant's endpoints and deliveries that Herald tells the tenant about
(operational events, app/signals/): a table the relay drains, and the triggers that fill it in
the transaction that made each thing happen -- whichever statement made it (a record's
function, a breaker's verdict, an API call, an operator's command). A trigger writes only for a
tenant with an operational endpoint, and never about an operational endpoint's own deliveries
(the loop rule, docs/decisions.md). Every statement is idempotent: this migration runs ahead of
0040 in the partitioning upgrade's test, and again after it, when the triggers go on the
partitioned table.

Revision ID: 0045
Revises: 0044
Create Date: 2026-12-10 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0045"
down_revision: str | None = "0044"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = """
CREATE TABLE IF NOT EXISTS operational_signals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id text NOT NULL,
    type text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)
"""

# Whether the tenant has an endpoint of its own subscribed to Herald's events: the one read a
# trigger makes for a tenant that has none. By the partial index below.
_WANTED = """
CREATE OR REPLACE FUNCTION operational_signals_wanted(tenant text) RETURNS boolean
STABLE LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM endpoints
                    WHERE tenant_id = tenant AND operational AND deleted_at IS NULL)
$$
"""

_SIGNAL = """
CREATE OR REPLACE FUNCTION operational_signal(tenant text, kind text, body jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO operational_signals (tenant_id, type, payload)
    VALUES (tenant, kind, body || jsonb_build_object('occurred_at', now()))
$$
"""

# A delivery ended without success: its attempts ran out, its receiver refused it, or it was
# cancelled. Not for a delivery to an operational endpoint (the loop rule).
_DELIVERY_ENDED = """
CREATE OR REPLACE FUNCTION signal_delivery_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
BEGIN
    SELECT id, customer_id, url, operational INTO e FROM endpoints WHERE id = NEW.endpoint_id;
    IF NOT FOUND OR e.operational OR NOT operational_signals_wanted(NEW.tenant_id) THEN
        RETURN NULL;
    END IF;
    PERFORM operational_signal(NEW.tenant_id, 'herald.delivery.dead', jsonb_build_object(
        'delivery_id', NEW.id, 'event_id', NEW.event_id, 'event_type', NEW.event_type,
        'endpoint_id', e.id, 'customer_id', e.customer_id, 'url', e.url,
        'state', NEW.state, 'reason', coalesce(NEW.dead_reason, 'cancelled'),
        'attempts', NEW.attempt_count, 'last_status_code', NEW.last_status_code));
    RETURN NULL;
END
$$
"""

# An endpoint disabled (by its receiver's 410, by Herald after a long failing streak, by a
# person) or enabled again; failing (its failures in a row reached the tenant's threshold) or
# recovered (a success after that). Disabling and enabling are told of every endpoint, an
# operational one too: each needs an enabling -- a person's act -- before it can happen again.
# Failing and recovered are not told of an operational endpoint: its own deliveries would feed
# them (the loop rule).
_ENDPOINT_HEALTH = """
CREATE OR REPLACE FUNCTION signal_endpoint_health() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    subject jsonb;
    threshold integer;
BEGIN
    IF NEW.deleted_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    subject := jsonb_build_object(
        'endpoint_id', NEW.id, 'customer_id', NEW.customer_id, 'url', NEW.url);
    IF OLD.enabled IS DISTINCT FROM NEW.enabled
       AND NOT operational_signals_wanted(NEW.tenant_id) THEN
        RETURN NULL;
    END IF;
    IF OLD.enabled AND NOT NEW.enabled THEN
        PERFORM operational_signal(NEW.tenant_id, 'herald.endpoint.disabled',
                                   subject || jsonb_build_object('reason', NEW.disabled_reason));
    ELSIF NEW.enabled AND NOT OLD.enabled THEN
        PERFORM operational_signal(NEW.tenant_id, 'herald.endpoint.enabled', subject);
    END IF;
    IF NEW.operational OR OLD.consecutive_failures = NEW.consecutive_failures THEN
        RETURN NULL;
    END IF;
    -- A failure crosses the threshold at most once a streak: the tenant's row is read (by its
    -- key), and whether anyone listens only when it does.
    SELECT coalesce(failing_after, 5) INTO threshold FROM tenants WHERE id = NEW.tenant_id;
    IF NOT ((NEW.consecutive_failures >= threshold AND OLD.consecutive_failures < threshold)
            OR (OLD.consecutive_failures >= threshold AND NEW.consecutive_failures = 0))
       OR NOT operational_signals_wanted(NEW.tenant_id) THEN
        RETURN NULL;
    END IF;
    IF NEW.consecutive_failures >= threshold AND OLD.consecutive_failures < threshold THEN
        PERFORM operational_signal(NEW.tenant_id, 'herald.endpoint.failing',
            subject || jsonb_build_object('consecutive_failures', NEW.consecutive_failures,
                                          'failing_since', NEW.failing_since));
    ELSIF OLD.consecutive_failures >= threshold AND NEW.consecutive_failures = 0
          AND NEW.last_success_at IS DISTINCT FROM OLD.last_success_at THEN
        PERFORM operational_signal(NEW.tenant_id, 'herald.endpoint.recovered',
            subject || jsonb_build_object('failures', OLD.consecutive_failures,
                                          'failing_since', OLD.failing_since));
    END IF;
    RETURN NULL;
END
$$
"""

# An ordered stream halted behind its dead head; not an operational endpoint's (the loop rule).
_STREAM_HALTED = """
CREATE OR REPLACE FUNCTION signal_stream_halted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
BEGIN
    SELECT id, tenant_id, customer_id, url, operational INTO e
      FROM endpoints WHERE id = NEW.endpoint_id;
    IF NOT FOUND OR e.operational OR NOT operational_signals_wanted(e.tenant_id) THEN
        RETURN NULL;
    END IF;
    PERFORM operational_signal(e.tenant_id, 'herald.stream.halted', jsonb_build_object(
        'endpoint_id', e.id, 'customer_id', e.customer_id, 'url', e.url,
        'stream', NEW.stream, 'head_delivery_id', NEW.head_id));
    RETURN NULL;
END
$$
"""


# A trigger on a partitioned table is cloned onto each partition. Where this migration ran
# before the table was partitioned (the upgrade's test runs it ahead of 0040), the old table --
# a partition now -- still has its own trigger of that name, and the clone would collide with
# it: dropped first, on the table and then on each partition.
def _drop_everywhere(trigger: str, table: str) -> str:
    return f"""
DO $$
DECLARE
    part regclass;
BEGIN
    EXECUTE 'DROP TRIGGER IF EXISTS {trigger} ON {table}';
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '{table}'::regclass
    LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS {trigger} ON %s', part);
    END LOOP;
END
$$"""  # noqa: S608 -- constants only


# The WHEN clauses keep the hot statements' cost to a comparison per row: a trigger's function
# runs only on the transitions it tells of.
_TRIGGERS = (
    _drop_everywhere("deliveries_signal_ended", "deliveries"),
    """CREATE TRIGGER deliveries_signal_ended AFTER UPDATE OF state ON deliveries
       FOR EACH ROW WHEN (NEW.state IN ('dead', 'cancelled')
                          AND OLD.state NOT IN ('dead', 'cancelled'))
       EXECUTE FUNCTION signal_delivery_ended()""",
    "DROP TRIGGER IF EXISTS endpoints_signal_health ON endpoints",
    """CREATE TRIGGER endpoints_signal_health
       AFTER UPDATE OF enabled, consecutive_failures ON endpoints
       FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled
                          OR (NEW.consecutive_failures = 0 AND OLD.consecutive_failures > 0)
                          OR (NEW.consecutive_failures > OLD.consecutive_failures
                              AND NEW.consecutive_failures <= 1000))
       EXECUTE FUNCTION signal_endpoint_health()""",
    "DROP TRIGGER IF EXISTS streams_signal_halted ON streams",
    """CREATE TRIGGER streams_signal_halted AFTER UPDATE OF halted_at ON streams
       FOR EACH ROW WHEN (OLD.halted_at IS NULL AND NEW.halted_at IS NOT NULL)
       EXECUTE FUNCTION signal_stream_halted()""",
)


def upgrade() -> None:
    # Each statement its own transaction, holding one table at a time: the accepts take
    # endpoints, then deliveries, then tenants, and the records deliveries, then endpoints, so a
    # transaction holding two of them while traffic runs could wait on each (a deadlock seen
    # when the upgrade ran beside producers). Every statement may run again.
    with op.get_context().autocommit_block():
        op.execute(_TABLE)
        # A constant default: no table rewrite.
        op.execute(
            "ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS operational boolean"
            " NOT NULL DEFAULT false"
        )
        op.execute(
            "CREATE INDEX IF NOT EXISTS ix_endpoints_operational ON endpoints (tenant_id)"
            " WHERE operational AND deleted_at IS NULL"
        )
        # An endpoint of the tenant's own already subscribed to herald.* types alone is one.
        op.execute(
            "UPDATE endpoints SET operational = true WHERE customer_id IS NULL"
            " AND cardinality(event_types) > 0 AND NOT operational"
            " AND NOT EXISTS (SELECT 1 FROM unnest(event_types) AS t WHERE t NOT LIKE 'herald.%')"
        )
        op.execute("ALTER TABLE tenants ADD COLUMN IF NOT EXISTS failing_after integer")
        for statement in (_WANTED, _SIGNAL, _DELIVERY_ENDED, _ENDPOINT_HEALTH, _STREAM_HALTED):
            op.execute(statement)
        for statement in _TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS streams_signal_halted ON streams")
    op.execute("DROP TRIGGER IF EXISTS endpoints_signal_health ON endpoints")
    op.execute("DROP TRIGGER IF EXISTS deliveries_signal_ended ON deliveries")
    for function in (
        "signal_stream_halted()",
        "signal_endpoint_health()",
        "signal_delivery_ended()",
        "operational_signal(text, text, jsonb)",
        "operational_signals_wanted(text)",
    ):
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    op.execute("ALTER TABLE tenants DROP COLUMN IF EXISTS failing_after")
    op.execute("DROP INDEX IF EXISTS ix_endpoints_operational")
    op.execute("ALTER TABLE endpoints DROP COLUMN IF EXISTS operational")
    op.execute("DROP TABLE IF EXISTS operational_signals")
