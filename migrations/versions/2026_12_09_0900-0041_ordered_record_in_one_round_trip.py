"""the ordered record in one round trip

The record that ends an ordered stream's head runs four statements in one transaction: lock the
streams, record, hand the streams on, lease the new heads the worker continues with. They
cannot be one SQL statement: a statement reads the snapshot it started with, and the hand-on
must see every accept that held a stream's lock before it (app/streams/repository/streams.py).
From the worker they were six round trips (with BEGIN and COMMIT), and a stream waits for them
between every two deliveries.

A PL/pgSQL function takes a fresh snapshot for each statement it runs (VOLATILE, the default),
so the four become one call, one round trip, their own transaction. The statements move here
from the repositories, as functions the repositories call, so that each is written once:

- ``lock_streams(endpoint_ids, stream_names)``: the streams' rows, in the one lock order;
- ``hand_on_streams(endpoint_ids, stream_names, skip_halted)``: each ended head's successor
  made the head (or the stream halted), returning the new heads;
- ``record_attempts(<the record's twelve columns as arrays>, least_id, greatest_id)``: the
  fenced record of many endings, returning the ids recorded;
- ``record_ordered(<the same>, stream_endpoint_ids, stream_names, continued_endpoint_ids,
  continued_stream_names, lease_seconds)``: the four in order, returning one row per id
  recorded (kind 'recorded'), per new head ('head') and per head leased ('leased').

Adds functions only, each created or replaced (run again, it finishes); the downgrade drops
them (code older than this does not call them).

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-09 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0041"
down_revision: str | None = "0040"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The record's columns, as the functions take them: one array each, in this order.
_RECORD_ARGUMENTS = """ids text[], tokens uuid[], states text[], outcomes text[],
    status_codes integer[], errors text[], dead_reasons text[], delays float8[],
    attempt_numbers integer[], started_ats timestamptz[], durations_ms integer[],
    response_bodies text[], least_id text, greatest_id text"""

_RECORD_ARGUMENT_NAMES = """ids, tokens, states, outcomes, status_codes, errors, dead_reasons,
    delays, attempt_numbers, started_ats, durations_ms, response_bodies, least_id, greatest_id"""

# Every writer takes stream rows first, in (endpoint, stream) order (the lock order:
# app/streams/repository/streams.py).
_LOCK_STREAMS = """
CREATE OR REPLACE FUNCTION lock_streams(endpoint_ids text[], stream_names text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM streams AS s
      JOIN unnest(endpoint_ids, stream_names) AS k(endpoint_id, stream)
           USING (endpoint_id, stream)
     ORDER BY s.endpoint_id, s.stream
       FOR UPDATE OF s;
END
$$
"""

# For each stream given whose head is no longer live: a dead head halts it when its endpoint
# says so (and skip_halted, an operator's skip, does not override that); otherwise the
# stream's next live delivery becomes its head, due at its own not-before time -- or, behind a
# head cancelled while its attempt was in flight, not before that attempt's lease ends -- and a
# stream with nothing live left has no head. A head that is still live (a retry) changes
# nothing. A stream with no head, or one whose head row is gone, is handed on too: nothing does
# that but a fault, and reconcile's repair relies on it. The caller locked every stream row
# (lock_streams) in an earlier statement.
_HAND_ON_STREAMS = """
CREATE OR REPLACE FUNCTION hand_on_streams(endpoint_ids text[], stream_names text[], skip_halted boolean)
RETURNS TABLE (id text, tenant_id text, endpoint_id text, next_attempt_at timestamptz,
               attempt_count integer, stream text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH given AS (
        SELECT s.endpoint_id, s.stream, s.head_id FROM streams AS s
          JOIN unnest(endpoint_ids, stream_names) AS k(endpoint_id, stream)
               USING (endpoint_id, stream)
    ), ended AS (
        SELECT g.endpoint_id, g.stream,
               coalesce(h.state = 'dead', false) AND e.on_dead = 'halt' AND NOT skip_halted
                   AS halts,
               CASE WHEN h.state = 'cancelled' THEN h.lease_until END AS in_flight_until
          FROM given AS g LEFT JOIN deliveries AS h ON h.id = g.head_id
                          JOIN endpoints AS e ON e.id = g.endpoint_id
         WHERE h.id IS NULL OR h.completed_at IS NOT NULL
    ), halted AS (
        UPDATE streams AS s SET halted_at = coalesce(s.halted_at, now())
          FROM ended
         WHERE ended.halts AND s.endpoint_id = ended.endpoint_id AND s.stream = ended.stream
    ), successor AS (
        SELECT ended.endpoint_id, ended.stream, n.id,
               greatest(coalesce(n.deliver_after, now()), ended.in_flight_until) AS due_at
          FROM ended CROSS JOIN LATERAL (
              SELECT d.id, d.deliver_after FROM deliveries AS d
               WHERE d.endpoint_id = ended.endpoint_id AND d.stream = ended.stream
                 AND d.completed_at IS NULL
               ORDER BY d.stream_seq LIMIT 1) AS n
         WHERE NOT ended.halts
    ), promoted AS (
        -- The ids as an array, too: each day's primary key is probed for them, where a join
        -- alone was planned (once, for a connection's plan) as a scan of every day's rows.
        UPDATE deliveries AS d
           SET next_attempt_at = coalesce(d.next_attempt_at, successor.due_at),
               updated_at = now()
          FROM successor
         WHERE d.id = successor.id AND d.id = ANY (ARRAY(SELECT id FROM successor))
        RETURNING d.id, d.tenant_id, d.endpoint_id, d.next_attempt_at, d.attempt_count,
                  d.stream
    ), moved AS (
        UPDATE streams AS s
           SET head_id = successor.id,
               head_since = CASE WHEN successor.id IS NOT NULL THEN now() END,
               halted_at = NULL
          FROM ended LEFT JOIN successor USING (endpoint_id, stream)
         WHERE NOT ended.halts AND s.endpoint_id = ended.endpoint_id
           AND s.stream = ended.stream
           AND (s.head_id IS DISTINCT FROM successor.id OR s.halted_at IS NOT NULL)
    )
    SELECT p.id, p.tenant_id, p.endpoint_id, p.next_attempt_at, p.attempt_count, p.stream
      FROM promoted AS p;
END
$$
"""

# The record, fenced by the lease (design.md, invariant 4): per row, only the current holder
# (id, token) of a live lease writes; an expired lease writes nothing, whether or not another
# worker took over. A delivery cancelled while its attempt was in flight keeps that lease, so
# that the attempt is still recorded -- and stays cancelled. least_id and greatest_id, known
# before a row is read, confine the statement to the days those ids were minted in (its plan
# leaves out the other days' partitions as it starts). In the same statement: the attempt
# rows, and a success's mark on its endpoint, once per endpoint (which closes the breaker;
# written only when something changes or a second has passed, so that a busy endpoint's row is
# not a hot spot). A failure's verdict on its endpoint needs reads and decisions, so it runs
# after this in the same transaction (app/endpoints/service/destination_health.py).
_RECORD_ATTEMPTS = f"""
CREATE OR REPLACE FUNCTION record_attempts({_RECORD_ARGUMENTS}) RETURNS SETOF text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH done AS (
        UPDATE deliveries AS d
           SET state = CASE WHEN d.state = 'cancelled' THEN d.state ELSE r.state END,
               lease_token = NULL, lease_until = NULL, last_outcome = r.outcome,
               last_status_code = r.status_code, last_error = r.error,
               dead_reason = CASE WHEN d.state = 'cancelled' THEN NULL ELSE r.dead_reason END,
               updated_at = now(),
               completed_at = CASE WHEN d.state = 'cancelled' THEN d.completed_at
                                   WHEN r.state IN ('succeeded', 'dead') THEN now() END,
               next_attempt_at = CASE WHEN r.delay IS NULL THEN d.next_attempt_at
                                      ELSE now() + make_interval(secs => r.delay) END
          FROM unnest(ids, tokens, states, outcomes, status_codes, errors, dead_reasons, delays,
                      attempt_numbers, started_ats, durations_ms, response_bodies)
               AS r(id, token, state, outcome, status_code, error, dead_reason, delay,
                    attempt_number, started_at, duration_ms, response_body)
         WHERE d.id = r.id AND d.lease_token = r.token AND d.state IN ('leased', 'cancelled')
           AND d.lease_until > now() AND d.id BETWEEN least_id AND greatest_id
        RETURNING d.id, d.endpoint_id, r.attempt_number, r.started_at, r.duration_ms,
                  r.status_code, r.outcome, r.error, r.response_body
    ), attempt AS (
        INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at,
                              duration_ms, status_code, outcome, error, response_body)
        SELECT id, endpoint_id, attempt_number, started_at, duration_ms, status_code,
               outcome, error, response_body
          FROM done WHERE outcome IS NOT NULL
    ), healthy AS (
        UPDATE endpoints AS e
           SET consecutive_failures = 0, failing_since = NULL, last_success_at = now(),
               paused_until = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.paused_until END,
               pause_reason = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.pause_reason END,
               breaker_trips = 0
          FROM (SELECT DISTINCT endpoint_id FROM done WHERE outcome = 'success') AS s
         WHERE e.id = s.endpoint_id
           AND (e.consecutive_failures > 0 OR e.breaker_trips > 0
                OR e.last_success_at IS NULL
                OR e.last_success_at < now() - interval '1 second')
    )
    SELECT done.id FROM done;
END
$$
"""  # noqa: S608 -- constants only

# The ordered group commit: lock, record, hand on, and lease the new heads of the streams the
# recording worker continues (continued_*), each statement seeing what the ones before it
# wrote and every accept that held a stream's lock before it. A head is leased as a claim
# leases (app/engine/repository/delivery_leases.py), if it is due now.
_RECORD_ORDERED = f"""
CREATE OR REPLACE FUNCTION record_ordered(
    {_RECORD_ARGUMENTS},
    stream_endpoint_ids text[], stream_names text[],
    continued_endpoint_ids text[], continued_stream_names text[], lease_seconds float8)
RETURNS TABLE (kind text, id text, tenant_id text, endpoint_id text,
               next_attempt_at timestamptz, attempt_count integer, stream text,
               attempt_floor integer, lease_token uuid, stream_seq bigint, ordering_key text,
               lease_left float8, event_id text)
-- A handful of rows, not the thousand a function is assumed to return: joined to endpoints and
-- events, they are looked up by key, where a thousand were planned as a scan of every day's.
ROWS 10
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    head record;
    to_lease text[] := '{{}}';
    least_head text;
    greatest_head text;
BEGIN
    PERFORM lock_streams(stream_endpoint_ids, stream_names);
    RETURN QUERY
    SELECT 'recorded'::text, r.id, NULL::text, NULL::text, NULL::timestamptz,
           NULL::integer, NULL::text, NULL::integer, NULL::uuid, NULL::bigint, NULL::text,
           NULL::float8, NULL::text
      FROM record_attempts({_RECORD_ARGUMENT_NAMES}) AS r(id);
    FOR head IN SELECT * FROM hand_on_streams(stream_endpoint_ids, stream_names, false) LOOP
        RETURN QUERY SELECT 'head'::text, head.id, head.tenant_id, head.endpoint_id,
                            head.next_attempt_at, head.attempt_count, head.stream,
                            NULL::integer, NULL::uuid, NULL::bigint, NULL::text,
                            NULL::float8, NULL::text;
        IF (head.endpoint_id, head.stream) IN (
            SELECT * FROM unnest(continued_endpoint_ids, continued_stream_names)
        ) THEN
            to_lease := to_lease || head.id;
        END IF;
    END LOOP;
    IF cardinality(to_lease) = 0 THEN
        RETURN;
    END IF;
    -- As parameters, the bounds leave out the other days' partitions as the statement starts.
    SELECT min(h.id), max(h.id) INTO least_head, greatest_head FROM unnest(to_lease) AS h(id);
    RETURN QUERY
    WITH leased AS (
        UPDATE deliveries AS d
           SET lease_token = gen_random_uuid(), state = 'leased',
               lease_until = now() + make_interval(secs => lease_seconds),
               attempt_count = d.attempt_count + 1, updated_at = now()
          FROM unnest(to_lease) AS h(id)
         WHERE d.id = h.id AND d.state IN ('pending', 'enqueued') AND d.next_attempt_at <= now()
           AND d.id BETWEEN least_head AND greatest_head
        RETURNING d.id, d.tenant_id, d.endpoint_id, d.next_attempt_at, d.attempt_count,
                  d.stream, d.attempt_floor, d.lease_token, d.stream_seq, d.ordering_key,
                  extract(epoch FROM d.lease_until - now())::float8 AS lease_left, d.event_id
    )
    SELECT 'leased'::text, l.* FROM leased AS l;
END
$$
"""  # noqa: S608 -- constants only

_FUNCTIONS = (
    "lock_streams(text[], text[])",
    "hand_on_streams(text[], text[], boolean)",
    "record_attempts(text[], uuid[], text[], text[], integer[], text[], text[], float8[],"
    " integer[], timestamptz[], integer[], text[], text, text)",
    "record_ordered(text[], uuid[], text[], text[], integer[], text[], text[], float8[],"
    " integer[], timestamptz[], integer[], text[], text, text, text[], text[], text[], text[],"
    " float8)",
)


def upgrade() -> None:
    for function in (_LOCK_STREAMS, _HAND_ON_STREAMS, _RECORD_ATTEMPTS, _RECORD_ORDERED):
        op.execute(function)


def downgrade() -> None:
    for signature in reversed(_FUNCTIONS):
        op.execute(f"DROP FUNCTION {signature}")
