"""docs/configuration.md, written from Herald's ``Settings``.

Each setting's environment variable, type, bounds and default are read from the model, so the
page cannot say other than what Herald does; what a setting is for is written here, in SECTIONS,
for the operator who sets it. ``make docs`` (``python -m devstack.settings_doc``) writes the page;
tests/unit/test_configuration_doc.py renders it again and fails when the file differs. A setting
added to ``Settings`` without a description here stops the render, naming it."""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import AnyHttpUrl, SecretStr
from pydantic.fields import FieldInfo

from app.core.config import Settings

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
PREFIX = "HERALD_"

# The page's sections, in order: each a title and its settings, each with what it does. Settings
# read from the environment are described here and nowhere else.
SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Servers and where Herald listens",
        [
            (
                "database_url",
                "PostgreSQL URL (`postgresql://user:password@host:5432/db`; the asyncpg driver is"
                " used). Unset, `herald-dev` and the test suite start an embedded PostgreSQL.",
            ),
            (
                "redis_url",
                "`redis://`, `rediss://` or `unix://` URL of one Redis node with"
                " `maxmemory-policy noeviction`. Unset, `herald-dev` starts an embedded Redis.",
            ),
            ("data_dir", "Where `herald-dev` keeps the embedded servers' data and its dev keys."),
            ("host", "The address `herald api` (and a worker's metrics port) binds to."),
            ("port", "The port `herald api` listens on."),
            ("region", "The region that owns the deliveries accepted here (docs/scaling.md)."),
            (
                "db_pool_size",
                "PostgreSQL connections per process (an API process or a worker); a caller beyond"
                " it waits up to 5 s for one.",
            ),
            (
                "api_url",
                "Where `herald reconcile` (the cron) finds the API to `POST /v1/reconcile` to.",
            ),
            (
                "public_url",
                "Where browsers reach this Herald (`https://webhooks.example.com`): portal links"
                " are made under it. Unset, under the URL the minting request came to.",
            ),
        ],
    ),
    (
        "Keys and secrets",
        [
            (
                "admin_api_key",
                "A bootstrap admin key, accepted as given by this API process (no database holds"
                " it). `herald keys create --admin` makes one every API accepts.",
            ),
            (
                "secret_keys",
                "The key ring every stored secret is sealed under (AES-256-GCM): `id:base64key`"
                " entries, comma-separated, the newest first (it seals; every one listed opens)."
                " `herald secrets new-key` makes an entry. Required: the API and workers refuse to"
                " start without it (`herald-dev` keeps one in `HERALD_DATA_DIR/dev-secret-keys`)."
                ' Rotating it: docs/operations.md, "Secrets at rest".',
            ),
            (
                "secret_rotation_overlap_hours",
                "After a signing secret or key pair is rotated, attempts carry a signature with"
                " the old one too for this long.",
            ),
            (
                "api_key_cache_seconds",
                "How long an API process trusts a key it already looked up: a revoked key works"
                " for at most this long (`0`: look it up on every request).",
            ),
        ],
    ),
    (
        "The API process's own HTTP server",
        [
            (
                "api_keep_alive_seconds",
                "A connection with no request under way is closed after this long, before its"
                " first request too. Behind a proxy, set it above the proxy's idle time for its"
                " upstream connections.",
            ),
            (
                "api_header_timeout_seconds",
                "A request's line and headers must all arrive within this of their first byte, or"
                " it is answered 408 and closed (1 s while half of"
                " `HERALD_API_MAX_CONNECTIONS` are open).",
            ),
            ("api_max_header_bytes", "A request's line and headers larger than this: 431."),
            ("api_max_headers", "A request with more header fields than this: 431."),
            (
                "api_max_connections",
                "Per process: with this many connections open (the new one's included) or"
                " requests running, a request is answered 503 at once.",
            ),
            (
                "api_max_connections_per_client",
                "Per process: connections one client may hold open (503 past it). A client is an"
                " IPv4 address or an IPv6 /64; the proxies uvicorn trusts (`FORWARDED_ALLOW_IPS`)"
                " are exempt, since they hold each client to its share themselves.",
            ),
            (
                "access_log",
                "A line per HTTP request. Off by default: it costs the API a fifth of its CPU per"
                " accept, and the proxy in front logs requests already (5xx answers are logged"
                " either way).",
            ),
        ],
    ),
    (
        "Accepting",
        [
            (
                "max_payload_bytes",
                "The largest payload, measured as compact UTF-8 JSON (413 past it). A single"
                " intent's request body may be twice this plus 64 KiB.",
            ),
            ("max_batch_bytes", "The largest `POST /v1/deliveries/batch` body."),
            (
                "idempotency_key_ttl_hours",
                "How long an `Idempotency-Key` is remembered; after it the key may be reused.",
            ),
            (
                "event_type_cache_seconds",
                "How long an API process keeps an event type's schema (or that it has none): a"
                " schema change reaches every API process within this, the one that made it at"
                " once.",
            ),
        ],
    ),
    (
        "Destinations and the way out",
        [
            (
                "destination_allowlist",
                "CIDRs exempt from the SSRF guard, comma-separated (e.g. `10.0.0.0/8`). Empty:"
                " only public addresses are delivered to.",
            ),
            (
                "egress_proxy",
                "`http://[user:password@]host:port`: every attempt and every OAuth2 token request"
                " leaves through this HTTP proxy, asked for the address the SSRF guard vetted,"
                ' never the name (docs/operations.md, "An egress proxy"). Unset: direct.',
            ),
            (
                "webhook_origin",
                "The DNS name Herald gives as `WebHook-Request-Origin` in the CloudEvents webhook"
                " handshake and on every delivery to an endpoint that consented; name all your"
                " Herald senders, e.g. `webhooks.example.com`.",
            ),
        ],
    ),
    (
        "Attempts and retries",
        [
            (
                "retry_schedule",
                "Seconds before retry *n*, comma-separated (fractions allowed); the last delay"
                " repeats. Each is jittered by ±20 %.",
            ),
            (
                "max_attempts",
                "Attempts before a delivery goes `dead`. Unset: the schedule's length + 1.",
            ),
            (
                "request_timeout_seconds",
                "The bound on one whole attempt, a slowly trickling answer included.",
            ),
            (
                "lease_seconds",
                "How long a worker holds a delivery per attempt; at least twice"
                " `HERALD_REQUEST_TIMEOUT_SECONDS`. Unset: the request timeout + 30 s, and never"
                " less than twice it.",
            ),
            (
                "retry_after_max_seconds",
                "The cap on a receiver's `Retry-After` (seconds or an HTTP date).",
            ),
        ],
    ),
    (
        "Workers",
        [
            (
                "worker_concurrency",
                "Deliveries a worker process holds at once, claimed and not yet recorded (also its"
                " HTTP connection pool's size).",
            ),
            (
                "delivery_batch_max",
                "The most deliveries one claim (one statement) takes for one destination.",
            ),
            ("record_batch_max", "The most attempt outcomes one group commit writes."),
            (
                "worker_shutdown_grace_seconds",
                "On SIGTERM, how long attempts in flight may finish. Unset: the request timeout +"
                " 5 s. Give a worker this + `HERALD_LEASE_SECONDS` + 30 s to stop"
                ' (docs/operations.md, "Stopping a worker").',
            ),
            (
                "worker_heartbeat_file",
                "A running worker touches it every 5 s (and removes it on a clean stop);"
                " `herald worker --check` reads it.",
            ),
            (
                "worker_metrics_port",
                "Each worker serves its own counters on this port (on `HERALD_HOST`). Unset: not"
                " served.",
            ),
        ],
    ),
    (
        "Relay and reconcile",
        [
            (
                "relay_interval_seconds",
                "How often each worker's relay looks for outbox rows the API did not publish.",
            ),
            ("relay_page_size", "Outbox rows per relay page."),
            (
                "relay_claim_seconds",
                "How long a relay's claim on an outbox page lasts if the relay dies mid-publish.",
            ),
            (
                "reconcile_interval_seconds",
                "`herald-dev`'s stand-in for the cron: a reconcile run this often (`0`: none)."
                " Production runs `herald reconcile` from cron instead.",
            ),
            ("reconcile_page_size", "Destinations (or outbox rows) per reconcile page."),
            (
                "reconcile_max_rows",
                "Destinations and outbox rows one run may go through; the next run carries on.",
            ),
            (
                "reconcile_grace_seconds",
                "How old an unpublished outbox row, or how overdue a delivery with no wake-up,"
                " must be before reconcile (and the status) treat it as fallen through.",
            ),
            (
                "enqueued_stale_seconds",
                "Only while Redis is unreachable: a due delivery waiting this long is shown"
                " `stuck`.",
            ),
            (
                "reconcile_stale_seconds",
                "`/readyz` reports reconcile `stale` after this long without a successful run"
                " (reported, not a readiness failure).",
            ),
        ],
    ),
    (
        "Flow control: protecting receivers",
        [
            (
                "default_max_in_flight",
                "The in-flight ceiling for endpoints that set none (`0`: none).",
            ),
            (
                "default_rate_limit_per_second",
                "The start-rate ceiling for endpoints that set none (`0`: none).",
            ),
            (
                "breaker_failures",
                "Consecutive failed attempts (retryable or unknown) that open a destination's"
                " circuit.",
            ),
            (
                "breaker_cooldown_seconds",
                "The first cool-down of an open circuit; it doubles with each trip in a row.",
            ),
            ("breaker_max_cooldown_seconds", "The cap on the cool-down."),
            (
                "disable_after_hours",
                "A destination failing this long without one success is disabled.",
            ),
        ],
    ),
    (
        "Tenants sharing one Herald",
        [
            (
                "tenant_max_endpoints",
                "Endpoints one tenant may have, unless the operator set its own"
                " (`PATCH /v1/tenants/{id}/limits`).",
            ),
            (
                "tenant_max_endpoints_per_customer",
                "Endpoints one customer of a tenant may have (the tenant's own count as one"
                " customer's).",
            ),
            (
                "tenant_max_fanout",
                "Deliveries one event may make; an event subscribed by more endpoints is refused"
                " (422).",
            ),
            (
                "tenant_accept_rate",
                "Intents (deliveries, batch items, events) one tenant may have accepted a second,"
                " across every API process; past it, 429 with `Retry-After` and nothing stored"
                " (`0`: no limit).",
            ),
            (
                "tenant_delivery_rate",
                "Attempts one tenant's deliveries may start a second, across every worker; past"
                " it they wait by policy, `throttled` (`0`: no limit).",
            ),
        ],
    ),
    (
        "Retention",
        [
            (
                "retention_days",
                "Terminal deliveries (with their attempts and outbox rows), events left without"
                " deliveries, expired idempotency keys and old reconcile runs are purged after"
                " this; it must outlast `HERALD_IDEMPOTENCY_KEY_TTL_HOURS`.",
            ),
        ],
    ),
    (
        "Metrics and logs",
        [
            ("metrics_public", "Serve the API's `/metrics` without the admin key."),
            (
                "metrics_cache_seconds",
                "The fleet gauges are computed from PostgreSQL at most this often.",
            ),
            (
                "log_format",
                "`json` (one event per line) or `console` (`herald-dev` sets it).",
            ),
            ("log_level", "The least severe log level written."),
        ],
    ),
    (
        "The console",
        [
            (
                "console_session_hours",
                "How long a console sign-in lasts (revoking its key ends it sooner).",
            ),
            (
                "console_secure_cookie",
                "The console's cookies are `Secure` when the request came over HTTPS (`auto`;"
                " uvicorn believes a proxy's `X-Forwarded-Proto` only from"
                " `FORWARDED_ALLOW_IPS`), or always (`always`: behind a TLS-terminating proxy).",
            ),
        ],
    ),
    (
        "Tests only",
        [
            (
                "fault",
                "A named crash point (`app/core/faults.py`): the process exits abruptly there. For"
                " the fault tests; leave it unset.",
            ),
        ],
    ),
]

HEADER = """\
# Configuration

<!-- Written by `make docs` from Settings (app/core/config.py) and devstack/settings_doc.py, which
     holds the descriptions: edit those, not this page. A test fails when they differ. -->

Herald reads its settings from the environment, each named `HERALD_` and the setting's name.
Every process validates them at start-up and stops on a bad one with a message naming it
(`herald: invalid configuration: HERALD_PORT: ...`). [`.env.example`](../.env.example) lists
them all with their defaults. A `HERALD_` variable that names no setting is ignored.

Two variables that are not Herald's own matter too:

- `OTEL_EXPORTER_OTLP_ENDPOINT` (OpenTelemetry's standard name): when set, the API and workers
  export spans (accept, publish, attempt, record) over OTLP/HTTP, and the other `OTEL_*`
  variables apply. Unset, tracing costs nothing, and a producer's `traceparent` is still
  carried to the receiver on every webhook request.
- `FORWARDED_ALLOW_IPS` (uvicorn's): the proxies whose `X-Forwarded-*` headers `herald api`
  believes (`127.0.0.1` unless set); see [operations.md](operations.md#in-front-of-herald-api).
"""


def _kind(field: FieldInfo) -> str:
    """The setting's type, as the operator writes it in the environment."""
    annotation: Any = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(f"`{value}`" for value in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple:
        [item, _] = typing.get_args(annotation)
        return "comma-separated CIDRs" if item is not float else "comma-separated numbers"
    names: dict[Any, str] = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "text",
        Path: "path",
        SecretStr: "secret",
        AnyHttpUrl: "URL",
    }
    return names[annotation]


def _bounds(field: FieldInfo) -> str:
    """The setting's bounds, as Settings checks them."""
    said: list[str] = []
    for rule in field.metadata:
        if isinstance(rule, annotated_types.Ge):
            said.append(f"≥ {_number(rule.ge)}")
        elif isinstance(rule, annotated_types.Gt):
            said.append(f"> {_number(rule.gt)}")
        elif isinstance(rule, annotated_types.Le):
            said.append(f"≤ {_number(rule.le)}")
        elif isinstance(rule, annotated_types.MinLen):
            said.append(f"at least {rule.min_length} characters")
        elif getattr(rule, "pattern", None):
            said.append(f"matching `{rule.pattern}`")
    return ", ".join(said)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return f"`{','.join(_number(item) for item in value)}`" if value else "empty"
    return f"`{_number(value)}`"


def render() -> str:
    """The page, from Settings and SECTIONS; raises ValueError when they name different
    settings."""
    fields = Settings.model_fields
    described = [name for _, settings in SECTIONS for name, _ in settings]
    missing = [name for name in fields if name not in described]
    unknown = [name for name in described if name not in fields]
    repeated = sorted({name for name in described if described.count(name) > 1})
    if missing or unknown or repeated:
        raise ValueError(
            "devstack/settings_doc.py and Settings disagree: "
            f"no description for {missing}, no such setting {unknown}, described twice {repeated}"
        )
    parts = [HEADER]
    for title, settings in SECTIONS:
        rows = [
            f"## {title}",
            "",
            "| variable | type | default | what it does |",
            "|---|---|---|---|",
        ]
        for name, description in settings:
            field = fields[name]
            kind = ", ".join(part for part in (_kind(field), _bounds(field)) if part)
            variable = f"`{PREFIX}{name.upper()}`"
            rows.append(f"| {variable} | {kind} | {_default(field)} | {description} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def main() -> None:
    PAGE.write_text(render())
    sys.stdout.write(f"wrote {PAGE}\n")


if __name__ == "__main__":
    main()
