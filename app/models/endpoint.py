from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, column_property, mapped_column

from app.core.db import Base


class Endpoint(Base):
    __tablename__ = "endpoints"
    __table_args__ = (
        Index(
            "ix_endpoints_tenant_live",
            "tenant_id",
            "id",
            postgresql_where=text("deleted_at IS NULL"),
        ),
        # A customer's endpoints (the portal's lists, an event published to a customer).
        Index(
            "ix_endpoints_customer_live",
            "tenant_id",
            "customer_id",
            postgresql_where=text("deleted_at IS NULL AND customer_id IS NOT NULL"),
        ),
        # Whether a tenant has an endpoint for Herald's own events: read by the triggers that
        # write operational signals (migration 0045), for every transition they tell of.
        Index(
            "ix_endpoints_operational",
            "tenant_id",
            postgresql_where=text("operational AND deleted_at IS NULL"),
        ),
        ForeignKeyConstraint(
            ["tenant_id", "customer_id"],
            ["customers.tenant_id", "customers.id"],
            name="endpoints_customer_fkey",
        ),
        CheckConstraint(
            "rate_limit_per_second IS NULL OR rate_limit_per_second > 0", name="rate_positive"
        ),
        CheckConstraint("max_in_flight IS NULL OR max_in_flight > 0", name="in_flight_positive"),
        CheckConstraint(
            "payload_format IN ('raw', 'standard', 'cloudevents', 'cloudevents-binary')",
            name="payload_format",
        ),
        CheckConstraint(
            "signature_schemes <@ ARRAY['v1', 'v1a'] AND cardinality(signature_schemes) >= 1",
            name="signature_schemes",
        ),
        CheckConstraint("ordering IN ('none', 'endpoint', 'key')", name="ordering"),
        CheckConstraint("on_dead IN ('halt', 'skip')", name="on_dead"),
        CheckConstraint("delivery IN ('push', 'poll')", name="delivery"),
        CheckConstraint("(url IS NULL) = (delivery = 'poll')", name="url_unless_polled"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"))
    # The tenant's customer the endpoint belongs to, fixed when it is made; NULL: the tenant's
    # own (an event published without a customer reaches these alone).
    customer_id: Mapped[str | None] = mapped_column(Text)
    # How its deliveries reach the receiver, fixed once made: ``push``, sent to ``url``; or
    # ``poll``, read by the receiver (app/delivery/service/polling.py), with no URL at all.
    delivery: Mapped[str] = mapped_column(Text, server_default="push")
    url: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    # NULL subscribes to every event type (the tenant's: Herald's own are named).
    event_types: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    # Subscribed to Herald's own events (herald.*) alone: an operational endpoint, whose own
    # deliveries tell of nothing (app/signals/, the loop rule). Decided from event_types.
    operational: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # A CEL expression over the event (app/programs/filters.py); NULL lets every subscribed
    # event through.
    filter: Mapped[str | None] = mapped_column(Text)
    # A CEL program that makes the request (app/programs/transformations.py): the current one,
    # as the API shows it; what each delivery is sent as is its version in transformations.
    transformation: Mapped[str | None] = mapped_column(Text)
    rate_limit_per_second: Mapped[float | None] = mapped_column(Double)
    max_in_flight: Mapped[int | None] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    # Every secret here is sealed (app/core/sealing.py) under HERALD_SECRET_KEYS, for the purposes
    # app/endpoints/service/sealed.py names: the database never holds one in plain text.
    secret_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    # What the request body is: the payload as accepted ("raw"), the Standard Webhooks
    # envelope {"type", "timestamp", "data"} around it ("standard"), a CloudEvent in structured
    # mode ("cloudevents") or the payload with the event's attributes in ce-* headers
    # ("cloudevents-binary"): app/engine/service/envelope.py.
    payload_format: Mapped[str] = mapped_column(Text, server_default="raw")
    # Which Standard Webhooks signatures every attempt carries: v1 (HMAC with the secret),
    # v1a (ed25519 with the key pair), or both.
    signature_schemes: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{v1}'::text[]")
    )
    # The ed25519 pair (app/endpoints/service/signing_keys.py): the private key sealed, the
    # public key (whpk_...) the receiver's to read; made at create, or when v1a is turned on
    # for an endpoint older than v1a. A rotation keeps the previous pair signing until it
    # expires, as for the secret.
    signing_key_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    public_key: Mapped[str | None] = mapped_column(Text)
    previous_signing_key_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    previous_public_key: Mapped[str | None] = mapped_column(Text)
    previous_signing_key_expires_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True)
    )
    # Ordered delivery: none, one stream for the endpoint, or one per ordering key;
    # and what a stream does when its head dies: halt (wait for an operator) or skip it.
    ordering: Mapped[str] = mapped_column(Text, server_default="none")
    on_dead: Mapped[str] = mapped_column(Text, server_default="halt")
    # Statuses that end a delivery at once besides the defaults (app/engine/service/outcomes.py).
    final_statuses: Mapped[list[int]] = mapped_column(
        ARRAY(SmallInteger), server_default=text("'{}'")
    )
    # Static headers sent on every attempt, vetted at save (app/endpoints/schemas/headers.py).
    headers: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    # Static headers whose values are credentials: sealed as one JSON object, their names kept
    # in the clear so the API and console can say what is set.
    secret_headers_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    secret_header_names: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    # Rotation keeps the previous secret signing alongside the new one until it expires.
    previous_secret_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # OAuth2 client credentials (app/engine/service/tokens.py): token_url, client_id, scope,
    # audience; the client secret sealed beside them. NULL: no token is fetched.
    oauth2: Mapped[dict[str, str] | None] = mapped_column(JSONB)
    oauth2_secret_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    # Mutual TLS and the receiver's own CA (app/core/certificates.py): the certificate, key and CA
    # bundle sealed as one JSON object -- the key is secret, and sealing the rest binds it to
    # this row too, so a written-over CA bundle cannot open -- with what identifies them in
    # the clear. Replaced material stays a fallback until previous_tls_expires_at.
    tls_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    tls: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    previous_tls_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    previous_tls: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    previous_tls_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The endpoint's own egress proxy (app/core/proxies.py): its URL with any credentials sealed,
    # and {url (less credentials), credentials (whether any)} in the clear.
    egress_proxy_sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    egress_proxy: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The CloudEvents webhook handshake (app/endpoints/service/handshakes.py): the origin the
    # receiver consented to (NULL: no consent required), the rate it allowed (requests a
    # minute; NULL: none), when. Sent as WebHook-Request-Origin on every delivery.
    webhook_origin: Mapped[str | None] = mapped_column(Text)
    webhook_allowed_rate: Mapped[int | None] = mapped_column(Integer)
    webhook_validated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Flow control owned by the delivery workers: backpressure pauses and the circuit breaker.
    paused_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pause_reason: Mapped[str | None] = mapped_column(Text)
    # Whether the pause is still in force, by the database clock: a paused_until in the past is
    # history, and is shown as no pause at all. Loaded with every endpoint row.
    pause_in_force: Mapped[bool] = column_property(func.coalesce(paused_until > func.now(), False))
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Start of the current run of failures (NULL while healthy): disabling is measured from it.
    failing_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Times the circuit breaker opened in a row (0: closed); the cool-down grows with it.
    breaker_trips: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_success_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_failure_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Soft delete: deliveries keep their endpoint for the audit trail.
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
