"""Spans are exported over OTLP when configured: `herald api` and `herald worker` run
as processes with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a collector on 127.0.0.1 that
decodes what it is sent (OTLP/HTTP, protobuf). The producer's trace reaches the collector from
both processes, and the receiver's parent is the exported attempt span."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.fixtures.processes import free_port, running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import eventually


@dataclass(frozen=True)
class ExportedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str


class Collector:
    """Every span exported to it, decoded."""

    def __init__(self) -> None:
        self.spans: list[ExportedSpan] = []
        self.url = ""

    async def traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        for resource_spans in export.resource_spans:
            service = next(
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            )
            for scope_spans in resource_spans.scope_spans:
                self.spans += [
                    ExportedSpan(
                        service,
                        s.name,
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                    )
                    for s in scope_spans.spans
                ]
        return web.Response(content_type="application/x-protobuf", body=b"")

    def named(self, name: str) -> list[ExportedSpan]:
        return [s for s in self.spans if s.name == name]


@asynccontextmanager
async def running_collector() -> AsyncIterator[Collector]:
    collector = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", collector.traces)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    collector.url = f"http://127.0.0.1:{port}"
    try:
        yield collector
    finally:
        await runner.cleanup()


async def test_spans_of_accept_publish_attempt_and_record_reach_an_otlp_collector(
    receiver: Receiver, stack: Stack, tmp_path: Path
) -> None:
    trace_id, producer_span = secrets.token_hex(16), secrets.token_hex(8)
    async with running_collector() as collector:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: export promptly
        }
        api = start_api(stack, tmp_path, **otel)
        try:
            await wait_healthy(api)
            with running_worker(stack, tmp_path / "worker.log", **otel):
                async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
                    created = await http.post("/v1/tenants", json={"name": "traced"}, headers=ADMIN)
                    tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
                    endpoint = await http.post(
                        "/v1/endpoints", json={"url": receiver.url("/t")}, headers=tenant
                    )
                    accepted = await http.post(
                        "/v1/deliveries",
                        json={
                            "endpoint_id": endpoint.json()["id"],
                            "event_type": "a.b",
                            "payload": {},
                        },
                        headers={**tenant, "traceparent": f"00-{trace_id}-{producer_span}-01"},
                    )
                    assert accepted.status_code == 202, accepted.text
                (arrived,) = await receiver.wait_for("/t", 1)

                async def exported() -> set[str]:
                    return {s.name for s in collector.spans}

                expected = {"herald.accept", "herald.publish", "herald.attempt", "herald.record"}
                await eventually(exported, lambda names: expected <= names, timeout=30)
        finally:
            api.stop()

    (accept,) = collector.named("herald.accept")
    assert (accept.service, accept.trace_id) == ("herald-api", trace_id)
    assert accept.parent_span_id == producer_span  # under the producer's own span
    (attempt,) = collector.named("herald.attempt")
    assert (attempt.service, attempt.trace_id) == ("herald-worker", trace_id)
    # The receiver's request continues the trace, with the exported attempt as its parent.
    assert arrived.headers["traceparent"] == f"00-{trace_id}-{attempt.span_id}-01"
    assert {s.service for s in collector.named("herald.record")} == {"herald-worker"}
