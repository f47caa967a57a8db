"""Leases on deliveries: the batch claim of a destination's due deliveries, and when the
destination can next be claimed. How a lease ends -- the fenced record, the give-back -- is
delivery_records.py. Each is one statement and its own transaction, so no transaction spans a
send (design.md, invariant 6)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import asyncpg

if TYPE_CHECKING:
    from app.programs.transformations import Transformed

# How many live rows the wake-up probe reads at most (design.md, invariant 7: bounded).
WAKE_PROBE_ROWS = 256


@dataclass(frozen=True)
class OAuth2Client:
    """An endpoint's OAuth2 client credentials, the secret sealed as stored."""

    token_url: str
    client_id: str
    scope: str | None
    audience: str | None
    sealed_secret: bytes


@dataclass(frozen=True)
class ClaimedDelivery:
    """Everything one attempt needs, fetched by the claim itself (one round trip)."""

    id: str
    endpoint_id: str
    attempt_number: int
    attempts_used: int  # since the last redrive
    url: str | None  # None: a polling endpoint's (the poll reads it; no worker sends it)
    # The signing secrets (the current first; a rotated-out one until it expires) and the
    # secret static headers, sealed as stored (app/core/sealing.py): opened by whoever sends.
    sealed_secrets: list[bytes]
    signature_schemes: list[str]  # v1, v1a or both
    sealed_keys: list[bytes]  # the ed25519 private keys for v1a, likewise
    endpoint_enabled: bool
    endpoint_deleted: bool
    event_id: str
    payload: bytes
    payload_format: str  # raw | standard | cloudevents | cloudevents-binary
    headers: dict[str, str]  # the endpoint's static headers
    sealed_headers: bytes | None
    event_type: str
    event_at: datetime  # when the event was accepted: the envelope's timestamp
    traceparent: str | None  # the producer's trace at accept (app/core/tracing.py)
    lease_left: float  # seconds, by the database's clock, as the claim returned
    token: uuid.UUID  # this row's lease token: only its holder may record or release
    tenant_id: str
    # Ordered delivery (app/streams/): the stream it is its head of and its number there (None:
    # unordered), and the producer's ordering key.
    stream: str | None = None
    stream_seq: int | None = None
    ordering_key: str | None = None
    oauth2: OAuth2Client | None = None
    # The TLS material (app/core/certificates.py), sealed: the current, then while it is a
    # fallback the one it replaced. Empty: the receiver is reached with the defaults.
    sealed_tls: list[bytes] = field(default_factory=list)
    # The endpoint's own egress proxy (its URL, credentials and all), sealed; None: the
    # operator's, or none.
    sealed_proxy: bytes | None = None
    # The origin the receiver consented to in the CloudEvents webhook handshake: sent as
    # WebHook-Request-Origin on every delivery (None: no handshake).
    webhook_origin: str | None = None
    # The statuses the endpoint makes final besides the defaults (outcomes.py).
    final_statuses: frozenset[int] = frozenset()
    # The tenant's CloudEvents source, read for CloudEvents endpoints (None: Herald's default).
    cloudevents_source: str | None = None
    # The endpoint's transformation as this delivery is sent (None: none): the version it had
    # when the delivery was accepted (app/programs/transformations.py).
    transformation: str | None = None
    # What it made of the event, once run for this attempt (app/engine/service/transforming.py).
    transformed: Transformed | None = None


@dataclass(frozen=True)
class ClaimBatch:
    """One claim of a destination's due deliveries, and when to look at it again."""

    rows: list[ClaimedDelivery]  # at most the limit, in (next_attempt_at, id) order
    # Seconds from now (database clock) until the destination's next live row becomes
    # claimable, the rows just claimed included (at their lease end): 0 or less is due now;
    # None, nothing live is left. Never late, at times early.
    next_wake: float | None


# The claim's parts (formatted into the statements: constants only, hence the S608 waivers).
# Claimable: waiting and due, or leased by a worker whose lease ran out (it died or stalled,
# and its delivery is taken over).
_CLAIMABLE = """((d.state IN ('pending', 'enqueued') AND d.next_attempt_at <= now())
        OR (d.state = 'leased' AND d.lease_until < now()))"""

# A claim's write, besides the token ($4: the lease in seconds). Of the columns an index names
# it changes only `state` (no index names it since migration 0010): the columns that order the
# live rows stay, so a claim is a HOT update.
# The ordered record leases a stream's next head with the same write (``record_ordered``,
# migration 0041).
_LEASE = """state = 'leased', lease_until = now() + make_interval(secs => $4),
       attempt_count = d.attempt_count + 1, updated_at = now()"""

_LEASED = """d.id, d.tenant_id, d.endpoint_id, d.attempt_count, d.attempt_floor, d.lease_token,
       d.stream, d.stream_seq, d.ordering_key,
       extract(epoch FROM d.lease_until - now())::float8 AS lease_left"""

# What signing and sending need of the endpoint (``e``), for the claim and for the ordered
# record's leased heads (delivery_records.py). A rotated-out secret or key pair signs until it
# expires.
ENDPOINT_COLUMNS = """e.url, e.secret_sealed,
       CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret_sealed END
           AS previous_secret_sealed,
       e.signature_schemes, e.signing_key_sealed,
       CASE WHEN e.previous_signing_key_expires_at > now() THEN e.previous_signing_key_sealed END
           AS previous_signing_key_sealed,
       e.enabled, e.deleted_at IS NOT NULL AS endpoint_deleted,
       e.payload_format, e.headers AS endpoint_headers, e.secret_headers_sealed,
       e.oauth2, e.oauth2_secret_sealed, e.tls_sealed,
       CASE WHEN e.previous_tls_expires_at > now() THEN e.previous_tls_sealed END
           AS previous_tls_sealed, e.egress_proxy_sealed, e.webhook_origin, e.final_statuses,
       CASE WHEN e.payload_format LIKE 'cloudevents%'
            THEN (SELECT t.cloudevents_source FROM tenants AS t WHERE t.id = e.tenant_id)
       END AS cloudevents_source"""

# The transformation a delivery ({d}) is sent as: its endpoint's version when it was accepted
# -- the last saved no later than its id -- or, once redriven, when it was redriven
# ({since}, the redrive's). One look in a small index, which finds nothing for an endpoint
# that never had one. Formatted with the delivery's alias and its transformed_since.
TRANSFORMATION_OF = """
       (SELECT t.source FROM transformations AS t
         WHERE t.endpoint_id = {d}.endpoint_id AND t.since <= coalesce({since}, {d}.id)
         ORDER BY t.since DESC, t.id DESC LIMIT 1) AS transformation"""

# When a destination ($1 region, $2 endpoint) next has a claimable row: the earliest of its
# live rows' due times, a leased row's being its lease end. Reads the first {rows} rows in
# claim order and locks nothing. Rows past them are due no earlier than the last one read (a
# leased row's lease ends after it was due), so a full read answers at most that: early, never
# late. {besides} leaves out rows the same statement has just claimed (it sees them as before).
_WAKE = """(
    SELECT CASE WHEN count(*) = {rows} THEN least(min(at), max(due)) ELSE min(at) END
      FROM (SELECT d.next_attempt_at AS due,
                   CASE WHEN d.state = 'leased' THEN d.lease_until ELSE d.next_attempt_at END AS at
              FROM deliveries AS d
             WHERE d.region = $1 AND d.endpoint_id = $2 AND d.completed_at IS NULL {besides}
             ORDER BY d.next_attempt_at, d.id LIMIT {rows}) AS live)"""

_WAKE_OF_THE_REST = _WAKE.format(
    rows="(SELECT n FROM probe_rows)", besides="AND d.id <> ALL (ARRAY(SELECT id FROM picked))"
)

# The batch claim ($3 limit, $4 lease seconds, $5 probe rows), one statement and its own
# transaction: up to $3 claimable rows of one destination in claim order, each with its own
# token; rows another claim holds are skipped, not waited for. `next_attempt_at <= now()` is
# redundant for leased rows (claimed once due) and bounds the scan of the live rows' index.
# The wake-up counts the rows just claimed as leased until now() + $4; the rest is probed, one
# row when the claim was full (whatever lies beyond that row is due no earlier than it).
# {kind}: the endpoints it claims for -- a worker's claim, pushed ones, and a deleted polling
# one's (whose deliveries die of it, as a pushed one's do); a poll's, a live polling one's --
# so that neither ever leases the other's deliveries (one look at the endpoint's key).
# {lease}: a poll's read also moves its row's place in the live index to its lease's end: a
# receiver may hold many reads at once, for long, and claims must not filter past them.
_CLAIM_BATCH = f"""
WITH picked AS MATERIALIZED (
    SELECT d.id FROM deliveries AS d
     WHERE d.region = $1 AND d.endpoint_id = $2 AND d.completed_at IS NULL
       AND d.next_attempt_at <= now() AND {_CLAIMABLE}
       AND EXISTS (SELECT FROM endpoints AS g WHERE g.id = $2 AND {{kind}})
     ORDER BY d.next_attempt_at, d.id LIMIT $3
       FOR UPDATE SKIP LOCKED
), probe_rows AS (
    SELECT CASE WHEN count(*) < $3 THEN $5 ELSE 1 END AS n FROM picked
), claimed AS (
    UPDATE deliveries AS d
       SET lease_token = gen_random_uuid(), {_LEASE}{{lease}}
      FROM picked WHERE d.id = picked.id
    RETURNING {_LEASED}, d.event_id, d.payload_days, d.next_attempt_at, d.transformed_since
), wake AS (
    SELECT least({_WAKE_OF_THE_REST},
                 (SELECT now() + make_interval(secs => $4) FROM picked LIMIT 1)) AS at
)
SELECT d.*, {ENDPOINT_COLUMNS}, v.payload, v.event_type, v.created_at AS event_at, v.traceparent,
       extract(epoch FROM wake.at - now())::float8 AS next_wake,
       {TRANSFORMATION_OF.format(d="d", since="d.transformed_since")}
  FROM wake LEFT JOIN (claimed AS d JOIN endpoints AS e ON e.id = d.endpoint_id
                                    JOIN events AS v ON v.id = d.event_id
                                                     AND v.payload_days = d.payload_days) ON TRUE
 ORDER BY d.next_attempt_at, d.id
"""  # noqa: S608
_CLAIMS = {
    "push": _CLAIM_BATCH.format(kind="(g.delivery = 'push' OR g.deleted_at IS NOT NULL)", lease=""),
    "poll": _CLAIM_BATCH.format(
        kind="g.delivery = 'poll' AND g.deleted_at IS NULL",
        lease=", next_attempt_at = now() + make_interval(secs => $4)",
    ),
}

_NEXT_WAKE = f"""
SELECT extract(epoch FROM {_WAKE.format(rows="$3", besides="")} - now())::float8
"""  # noqa: S608


def _json_object(value: str | dict[str, str]) -> dict[str, str]:
    # The pool's connections decode jsonb as text (SQLAlchemy's asyncpg dialect parses JSON
    # itself); a plain asyncpg connection might hand back the object.
    return value if isinstance(value, dict) else json.loads(value)


def _oauth2(row: asyncpg.Record) -> OAuth2Client | None:
    if row["oauth2"] is None or row["oauth2_secret_sealed"] is None:
        return None
    settings = _json_object(row["oauth2"])
    return OAuth2Client(
        token_url=settings["token_url"],
        client_id=settings["client_id"],
        scope=settings.get("scope"),
        audience=settings.get("audience"),
        sealed_secret=row["oauth2_secret_sealed"],
    )


def claimed_from(row: asyncpg.Record) -> ClaimedDelivery:
    sealed_secrets = [row["secret_sealed"]]
    if row["previous_secret_sealed"]:
        sealed_secrets.append(row["previous_secret_sealed"])
    sealed_keys = [
        key for key in (row["signing_key_sealed"], row["previous_signing_key_sealed"]) if key
    ]
    return ClaimedDelivery(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        attempt_number=row["attempt_count"],
        attempts_used=row["attempt_count"] - row["attempt_floor"],
        url=row["url"],
        sealed_secrets=sealed_secrets,
        signature_schemes=list(row["signature_schemes"]),
        sealed_keys=sealed_keys,
        event_id=row["event_id"],
        endpoint_enabled=row["enabled"],
        endpoint_deleted=row["endpoint_deleted"],
        payload=row["payload"],
        payload_format=row["payload_format"],
        headers=_json_object(row["endpoint_headers"]),
        sealed_headers=row["secret_headers_sealed"],
        event_type=row["event_type"],
        event_at=row["event_at"],
        traceparent=row["traceparent"],
        lease_left=row["lease_left"],
        token=row["lease_token"],
        tenant_id=row["tenant_id"],
        stream=row["stream"],
        stream_seq=row["stream_seq"],
        ordering_key=row["ordering_key"],
        oauth2=_oauth2(row),
        sealed_tls=[tls for tls in (row["tls_sealed"], row["previous_tls_sealed"]) if tls]
        if row["tls_sealed"]
        else [],
        sealed_proxy=row["egress_proxy_sealed"],
        webhook_origin=row["webhook_origin"],
        final_statuses=frozenset(row["final_statuses"] or ()),
        cloudevents_source=row["cloudevents_source"],
        transformation=row["transformation"],
    )


async def claim_batch(
    connection: asyncpg.Connection,
    *,
    region: str,
    endpoint_id: str,
    limit: int,
    lease_seconds: float,
    delivery: str = "push",
) -> ClaimBatch:
    """Lease up to ``limit`` claimable deliveries of one destination, oldest due first, and
    say when the destination next has one (one statement, one round trip). ``delivery``:
    ``push`` for a worker's claim, ``poll`` for a poll's; the other kind's endpoint has none."""
    rows = await connection.fetch(
        _CLAIMS[delivery], region, endpoint_id, limit, lease_seconds, WAKE_PROBE_ROWS
    )
    # The statement always returns a row (the wake-up); without a claim its columns are NULL.
    claimed = [claimed_from(row) for row in rows if row["id"] is not None]
    return ClaimBatch(claimed, rows[0]["next_wake"])


async def next_wake(
    connection: asyncpg.Connection, *, region: str, endpoint_id: str
) -> float | None:
    """The batch claim's wake-up alone: seconds until the destination's next live delivery
    becomes claimable (0 or less: now), None when it has none. Claims and locks nothing."""
    seconds: float | None = await connection.fetchval(
        _NEXT_WAKE, region, endpoint_id, WAKE_PROBE_ROWS
    )
    return seconds


async def still_held(connection: asyncpg.Connection, delivery_id: str, token: uuid.UUID) -> bool:
    """Whether the lease is still this holder's and the delivery still to be sent: a claimed
    row that waited for its start slot may have been cancelled meanwhile (it keeps its lease
    token then, so that a record could still land)."""
    held: bool = await connection.fetchval(
        "SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = $1 AND lease_token = $2"
        " AND state = 'leased' AND lease_until > now())",
        delivery_id,
        token,
    )
    return held
