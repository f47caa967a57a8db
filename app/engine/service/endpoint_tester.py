"""``POST /v1/endpoints/{id}/test``: one signed test event sent now through the endpoint's
whole path -- the SSRF guard, the egress proxy, its TLS material, its OAuth2 token, its
signature schemes and payload format -- by the same code an attempt runs, each step reported as
it went. The TLS material tested is the current one, never a fallback: a replacement can be
tried before the material it replaced stops being one. Nothing is
stored: no delivery, no attempt, no mark on the endpoint's health."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from app.core.config import Settings
from app.core.errors import DestinationRefused, ServiceUnavailable, TooManyRequests
from app.core.ids import new_id
from app.core.redis_clients import FlowRedis, LuaScript
from app.core.sealing import KeyRing, OpenedSecrets
from app.core.states import Outcome
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.endpoints.service.handshakes import Consent, HandshakeTarget
from app.engine.repository.delivery_leases import ClaimedDelivery, OAuth2Client
from app.engine.service import egress, envelope, handshake, sender
from app.engine.service.client_tls import ClientContexts
from app.engine.service.http_client import HttpClient
from app.engine.service.http_session import build_http_session
from app.engine.service.tokens import TokenFailed, Tokens
from app.models import Endpoint

TEST_EVENT_TYPE = "herald.test"
# Test sends a tenant may make a minute, across API processes: a test is a request Herald
# makes on a tenant's word, outside every endpoint's flow control. A portal's count against
# their customer's minute and, all customers together, against the tenant's larger one:
# customers cost a tenant nothing to make.
TESTS_PER_MINUTE = 10
TESTS_PER_MINUTE_ALL_CUSTOMERS = 60
COUNT_SECONDS = 1.0
# KEYS: the minute's counters; ARGV: their limits. Counts against every counter, or -- when
# one is full -- against none, and says which (1-based): a customer refused at its own limit
# must not use up its tenant's minute for the other customers.
_COUNT_UNLESS_FULL = """
for i, key in ipairs(KEYS) do
    if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i]) then return i end
end
for _, key in ipairs(KEYS) do
    redis.call('INCR', key)
    redis.call('EXPIRE', key, 120)
end
return 0
"""
# Tests and handshakes one tenant may have waiting on receivers at once, in one API process.
# Each may wait its whole timeout on a receiver that never answers; past this share the next
# is refused at once, never queued, so one tenant's never hold what another's need. Its
# customers' are counted apart -- each customer's, and all of them together -- so that no
# customer holds what its tenant, or another customer, needs.
IN_FLIGHT_PER_TENANT = 2
IN_FLIGHT_PER_CUSTOMER = 1
IN_FLIGHT_ALL_CUSTOMERS = 2
StepOutcome = Literal["ok", "failed", "skipped"]
# A save waits on the receiver's consent: not for as long as an attempt may take.
HANDSHAKE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Step:
    step: str  # destination | proxy | tls | oauth2 | signature | request
    outcome: StepOutcome
    detail: str


@dataclass
class Report:
    delivered: bool = False
    status_code: int | None = None
    duration_ms: int | None = None
    response_body: str | None = None
    steps: list[Step] = field(default_factory=list)

    def add(self, step: str, outcome: StepOutcome, detail: str) -> None:
        self.steps.append(Step(step, outcome, detail))


async def _refused_destination(url: str | None, allowlist: Sequence[IPNetwork]) -> str | None:
    """Why the test cannot be sent where the endpoint points; None: it can."""
    if url is None:
        return "a polling endpoint has no URL: send it a test event, then poll for it"
    try:
        await check_endpoint_url(url, allowlist)
    except DestinationRefused as exc:
        return str(exc)
    return None


def _claimed(endpoint: Endpoint, now: datetime, cloudevents_source: str | None) -> ClaimedDelivery:
    """The endpoint's row as an attempt's claim would read it, for a test event."""
    sealed_secrets = [endpoint.secret_sealed]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret_sealed and expires is not None and expires > now:
        sealed_secrets.append(endpoint.previous_secret_sealed)
    keys = [endpoint.signing_key_sealed] if endpoint.signing_key_sealed else []
    key_expires = endpoint.previous_signing_key_expires_at
    if endpoint.previous_signing_key_sealed and key_expires is not None and key_expires > now:
        keys.append(endpoint.previous_signing_key_sealed)
    oauth2 = None
    if endpoint.oauth2 is not None and endpoint.oauth2_secret_sealed is not None:
        settings = endpoint.oauth2
        oauth2 = OAuth2Client(
            token_url=settings["token_url"],
            client_id=settings["client_id"],
            scope=settings.get("scope"),
            audience=settings.get("audience"),
            sealed_secret=endpoint.oauth2_secret_sealed,
        )
    event_id = new_id("evt")
    payload = {"test": True, "endpoint_id": endpoint.id, "sent_at": now.isoformat()}
    return ClaimedDelivery(
        id=new_id("test"),
        endpoint_id=endpoint.id,
        attempt_number=1,
        attempts_used=1,
        url=endpoint.url,
        sealed_secrets=sealed_secrets,
        signature_schemes=list(endpoint.signature_schemes),
        sealed_keys=keys,
        endpoint_enabled=endpoint.enabled,
        endpoint_deleted=False,
        event_id=event_id,
        payload=json.dumps(payload, separators=(",", ":")).encode(),
        payload_format=endpoint.payload_format,
        headers=dict(endpoint.headers),
        sealed_headers=endpoint.secret_headers_sealed,
        event_type=TEST_EVENT_TYPE,
        event_at=now,
        traceparent=None,
        lease_left=0.0,
        token=uuid.uuid4(),
        tenant_id=endpoint.tenant_id,
        oauth2=oauth2,
        sealed_tls=[endpoint.tls_sealed] if endpoint.tls_sealed else [],
        sealed_proxy=endpoint.egress_proxy_sealed,
        webhook_origin=endpoint.webhook_origin,
        cloudevents_source=cloudevents_source,
    )


def _tls_step(endpoint: Endpoint) -> tuple[StepOutcome, str]:
    facts = endpoint.tls
    if facts is None:
        return "skipped", "no TLS material: the receiver's certificate checked as for any endpoint"
    said = []
    if facts.get("client_certificate"):
        said.append(f"presenting the client certificate {facts['client_certificate']['subject']}")
    if facts.get("ca_bundle"):
        said.append("trusting the endpoint's CA bundle alone")
    return "ok", ", ".join(said)


async def _heard(progress: sender.SendProgress) -> None:
    """A test obeys no Retry-After: it pauses nothing (it reports the answer)."""


class EndpointTester:
    """Built once in the API's lifespan: its own HTTP session (with the workers' SSRF guard),
    cache of opened secrets, and OAuth2 token cache."""

    def __init__(self, settings: Settings, keys: KeyRing) -> None:
        self._settings = settings
        self._proxy = egress.from_settings(settings)
        # No pool-wide cap: each tenant's share is (IN_FLIGHT_PER_TENANT), so none can fill it.
        self._http = build_http_session(
            settings.destination_allowlist, 0, self._proxy, user_agent=settings.user_agent
        )
        self._client = HttpClient(settings.destination_allowlist, 0)
        self._in_flight: Counter[tuple[str, str]] = Counter()
        self._opened = OpenedSecrets(keys)
        self._contexts = ClientContexts(keys)
        self._tokens = Tokens(
            self._http,
            self._opened,
            settings.destination_allowlist,
            settings.request_timeout_seconds,
            self._proxy,
        )

    async def handshake(
        self, tenant_id: str, target: HandshakeTarget, *, customer: str = ""
    ) -> Consent:
        """The webhook handshake for a save (handshake.py), on this session: the API's own
        way out, with the workers' SSRF guard, in one of the tenant's (or customer's) slots."""
        with self._slot(tenant_id, customer):
            return await handshake.handshake(
                self._http,
                target,
                origin=self._settings.webhook_origin,
                allowlist=self._settings.destination_allowlist,
                operator_proxy=self._proxy,
                timeout=min(self._settings.request_timeout_seconds, HANDSHAKE_TIMEOUT_SECONDS),
            )

    @contextlib.contextmanager
    def _slot(self, tenant_id: str, customer: str = "") -> Iterator[None]:
        """One of the tenant's ``IN_FLIGHT_PER_TENANT`` -- or, for a customer, one of its own
        and of its tenant's customers' together; TooManyRequests when they are taken."""
        shares = [((tenant_id, ""), IN_FLIGHT_PER_TENANT, "a tenant")]
        if customer:
            shares = [
                ((tenant_id, customer), IN_FLIGHT_PER_CUSTOMER, "a customer"),
                ((tenant_id, "*"), IN_FLIGHT_ALL_CUSTOMERS, "a tenant's customers together"),
            ]
        for key, most, whose in shares:
            if self._in_flight[key] >= most:
                raise TooManyRequests(
                    f"at most {most} endpoint tests or webhook handshakes of {whose} wait on "
                    "receivers at once: try again when one has been answered",
                    headers={"Retry-After": "1"},
                )
        for key, _, _ in shares:
            self._in_flight[key] += 1
        try:
            yield
        finally:
            for key, _, _ in shares:
                self._in_flight[key] -= 1
                if not self._in_flight[key]:
                    del self._in_flight[key]

    async def close(self) -> None:
        self._client.close()
        await self._http.close()

    async def admit(
        self, redis: FlowRedis, tenant_id: str, what: str = "endpoint tests", *, customer: str = ""
    ) -> None:
        """Count the tenant's test (or webhook handshake, or portal replay: ``what``) against
        its minute -- a portal's against its customer's own minute (``customer``); raise
        TooManyRequests past the limit. Each is work Herald does on a tenant's word, outside
        every endpoint's flow control."""
        minute = int(time.time() // 60)
        counted = f"herald:{what.replace(' ', '-')}"
        # The tenant's id as the hash tag: one script counts a customer's minute and all of
        # the tenant's customers' together, which on a Redis Cluster must share a slot.
        limits = [  # (key, limit, whose)
            (f"{counted}:{{{tenant_id}}}:{minute}", TESTS_PER_MINUTE, "per tenant")
        ]
        if customer:
            limits = [
                (
                    f"{counted}:{{{tenant_id}}}/{customer}:{minute}",
                    TESTS_PER_MINUTE,
                    "per customer",
                ),
                (
                    f"{counted}:{{{tenant_id}}}/*:{minute}",
                    TESTS_PER_MINUTE_ALL_CUSTOMERS,
                    "from all of a tenant's customers together",
                ),
            ]
        count = LuaScript(redis, _COUNT_UNLESS_FULL)
        try:
            async with asyncio.timeout(COUNT_SECONDS):
                refused = int(
                    await count(
                        keys=[key for key, _, _ in limits], args=[limit for _, limit, _ in limits]
                    )
                )
        except Exception as exc:  # uncounted, it is not done: this work is the tenant's word
            raise ServiceUnavailable(
                f"{what} are counted in Redis, which does not answer: try again shortly",
                headers={"Retry-After": "5"},
            ) from exc
        if refused:
            _, limit, whose = limits[refused - 1]
            raise TooManyRequests(
                f"at most {limit} {what} a minute {whose}",
                headers={"Retry-After": str(60 - int(time.time()) % 60)},
            )

    async def test(
        self, endpoint: Endpoint, cloudevents_source: str | None = None, *, customer: str = ""
    ) -> Report:
        """The test event, in one of the tenant's (or ``customer``'s) slots -- TooManyRequests
        when none is free; ``cloudevents_source``: the tenant's own, when it set one."""
        with self._slot(endpoint.tenant_id, customer):
            return await self._test(endpoint, cloudevents_source)

    async def _test(self, endpoint: Endpoint, cloudevents_source: str | None) -> Report:
        report = Report()
        claimed = _claimed(endpoint, datetime.now(UTC), cloudevents_source)
        allowlist = self._settings.destination_allowlist
        url = endpoint.url
        refused = await _refused_destination(url, allowlist)
        if refused is not None:
            report.add("destination", "failed", refused)
            return report
        assert url is not None  # a polling endpoint's is refused
        report.add("destination", "ok", "the URL resolves to addresses the SSRF guard allows")
        try:
            own = egress.endpoint_proxy(claimed, self._opened)
        except envelope.RequestNotBuilt as exc:
            report.add("proxy", "failed", str(exc))
            return report
        proxy = own or self._proxy
        if own is not None:
            report.add("proxy", "ok", f"through the endpoint's egress proxy {own.url}")
        elif proxy is not None:
            report.add("proxy", "ok", "through the operator's egress proxy")
        else:
            report.add("proxy", "skipped", "no egress proxy: sent directly")
        try:
            contexts = self._contexts.of(claimed)
            tls = contexts[0] if contexts else None
        except envelope.RequestNotBuilt as exc:
            report.add("tls", "failed", str(exc))
            return report
        report.add("tls", *_tls_step(endpoint))
        try:
            body = envelope.request_body(claimed)
            headers = envelope.request_headers(
                claimed, body, {}, self._opened, user_agent=self._settings.user_agent
            )
        except envelope.RequestNotBuilt as exc:
            report.add("signature", "failed", str(exc))
            return report
        if claimed.oauth2 is None:
            report.add("oauth2", "skipped", "no OAuth2 client credentials")
        else:
            try:
                token = await self._tokens.bearer(claimed, proxy)
            except TokenFailed as exc:
                report.add("oauth2", "failed", str(exc))
                return report
            report.add("oauth2", "ok", f"a token from {claimed.oauth2.token_url}")
            headers["Authorization"] = f"Bearer {token.value}"
        schemes = " and ".join(claimed.signature_schemes)
        report.add("signature", "ok", f"signed {schemes}, sent as {claimed.payload_format}")
        progress = sender.SendProgress()
        result = await sender.send(
            self._client,
            url=url,
            body=body,
            headers=headers,
            timeout=self._settings.request_timeout_seconds,
            progress=progress,
            retry_after_max=0,
            on_answer=_heard,
            proxy=proxy,
            tls=tls,
        )
        report.status_code, report.duration_ms = result.status_code, result.duration_ms
        report.response_body = result.response_body
        report.delivered = result.outcome is Outcome.SUCCESS
        if result.status_code is not None:
            detail = f"HTTP {result.status_code} in {result.duration_ms} ms ({result.outcome})"
        else:
            detail = f"{result.outcome}: {result.error}"
        report.add("request", "ok" if report.delivered else "failed", detail)
        return report
