"""The Python client (clients/python, ``herald_client``) against a real ``herald api`` process:
typed answers from every resource (an admin key's too), a receiver verifying with ``verify``, and
a create retried through a database outage that still makes exactly one delivery."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from herald_client import AsyncHerald, Herald, HeraldError, InvalidSignature, verify
from herald_client.models import (
    Delivery,
    DeliveryDetail,
    EndpointCreated,
    Event,
    Limits,
    Page,
    PortalSessionListed,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_tenant
from tests.fixtures.engine import pump
from tests.fixtures.processes import ApiProcess, start_api, wait_healthy
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN_KEY, OwnPostgres, Stack
from tests.fixtures.tls import Authority
from tests.fixtures.waiting import count_rows, wait_state


@contextmanager
def api_process(stack: Stack, logs: Path) -> Iterator[ApiProcess]:
    api = start_api(stack, logs)
    try:
        yield api
    finally:
        api.process.terminate()
        api.process.wait(timeout=30)


async def tenant_key(api: ApiProcess) -> str:
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        tenant = await new_tenant(http, "client-co")
    return tenant["Authorization"].removeprefix("Bearer ")


async def test_the_client_speaks_every_resource_typed_and_a_receiver_verifies(
    stack: Stack,
    settings: Settings,
    engine: AsyncEngine,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        with Herald(api.base_url, key) as herald:
            endpoint = herald.endpoints.create(
                receiver.url("/client"),
                event_types=["order.*"],
                payload_format="standard",
                secret_headers={"X-Receiver-Key": "client-sealed"},
            )
            assert isinstance(endpoint, EndpointCreated) and endpoint.secret.startswith("whsec_")
            assert endpoint.secret_header_names == ["X-Receiver-Key"]
            assert endpoint.public_key is not None and endpoint.signature_schemes == ["v1"]
            turned = herald.endpoints.update(endpoint.id, signature_schemes=["v1", "v1a"])
            assert turned.public_key == endpoint.public_key
            rotated_key = herald.endpoints.rotate_signing_key(endpoint.id)
            assert rotated_key["public_key"] != endpoint.public_key
            assert herald.endpoints.get(endpoint.id).previous_public_key == endpoint.public_key
            tried = herald.endpoints.try_transformation(
                endpoint.id, "order.paid", '{"body": {"n": payload.order}}', {"order": 7}
            )
            assert tried["outcome"] == "sent" and tried["request"]["body"] == {"n": 7}
            authority = Authority(tmp_path / "ca")
            certificate, client_key = authority.client_certificate("client-made")
            material = {"client_certificate": certificate, "client_key": client_key}
            secured = herald.endpoints.create("https://127.0.0.1:9/mtls", tls=material)
            assert secured.tls is not None and secured.tls.client_certificate is not None
            assert secured.tls.client_certificate.subject == "CN=client-made"
            herald.endpoints.delete(secured.id)  # the events below are for `endpoint` alone
            # In a thread: the receiver answering the test event runs on this test's loop.
            tested = await asyncio.to_thread(herald.endpoints.test, endpoint.id)
            assert tested["delivered"] and tested["steps"][-1]["step"] == "request"
            delivery = herald.deliveries.create(endpoint.id, "order.paid", {"order": 7})
            assert isinstance(delivery, Delivery) and delivery.state in ("pending", "enqueued")
            later = herald.deliveries.create(
                endpoint.id, "order.later", {}, deliver_after=datetime.now(UTC) + timedelta(hours=1)
            )
            published = herald.events.publish("order.shipped", {"order": 7})
            assert [d.endpoint_id for d in published.deliveries] == [endpoint.id]

            # Not attempted yet, so not to be retried now: the 409 as the client raises it.
            with pytest.raises(HeraldError, match="has not been attempted yet") as refused:
                herald.deliveries.retry_now(later.id)
            assert refused.value.status == 409
            cancelled = herald.deliveries.cancel(later.id)
            assert cancelled.state == "cancelled"
            listed = herald.deliveries.list(event_id=published.id)
            assert isinstance(listed, Page) and [d.id for d in listed.items] == [
                published.deliveries[0].id
            ]
            assert herald.endpoints.update(endpoint.id, description="client").description == (
                "client"
            )
            assert [e.id for e in herald.endpoints.list().items] == [endpoint.id]

            async with pump(settings, engine) as (running, _):
                running.start()
                await wait_state(engine, delivery.id, "succeeded")
                await wait_state(engine, published.deliveries[0].id, "succeeded")

            detail = herald.deliveries.get(delivery.id)
            assert isinstance(detail, DeliveryDetail) and detail.waiting_reason == "succeeded"
            [attempt] = herald.deliveries.attempts(delivery.id).items
            assert attempt.status_code == 200
            event = herald.events.get(delivery.event_id)
            assert isinstance(event, Event) and event.payload == {"order": 7}

            with pytest.raises(HeraldError) as missing:
                herald.deliveries.get("dlv_01JDQ8Z6V4Q0K9X7M3T5R2N8C1")
            assert missing.value.status == 404
            assert missing.value.problem.detail is not None

    # What the receiver got verifies with the endpoint's secret, and only as sent (the first
    # request was the test event).
    test_event, sent = receiver.on("/client")[:2]
    assert test_event.headers["webhook-id"].startswith("test_")
    assert sent.headers["X-Receiver-Key"] == "client-sealed"
    body = verify(sent.headers, sent.body, endpoint.secret)
    assert body["type"] in ("order.paid", "order.shipped") and body["data"]["order"] == 7
    with pytest.raises(InvalidSignature):
        verify(sent.headers, sent.body + b" ", endpoint.secret)
    with pytest.raises(InvalidSignature):
        verify(sent.headers, sent.body, "whsec_" + "A" * 43 + "=")
    # Signed v1 and v1a after the update: the public key verifies the later attempt.
    later_sent = [r for r in receiver.on("/client") if "v1a," in r.headers["webhook-signature"]]
    assert later_sent, "a delivery after v1a was turned on"
    assert verify(later_sent[0].headers, later_sent[0].body, rotated_key["public_key"])
    with pytest.raises(InvalidSignature):
        verify(later_sent[0].headers, later_sent[0].body + b" ", rotated_key["public_key"])


async def test_a_create_retried_through_an_outage_makes_one_delivery_under_one_key(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    seen: list[tuple[int, str]] = []  # (status, Idempotency-Key) of every answer
    outage_met = asyncio.Event()

    async def on_response(response: httpx.Response) -> None:
        if response.request.url.path == "/v1/deliveries":
            seen.append((response.status_code, response.request.headers["Idempotency-Key"]))
            if response.status_code == 503:
                outage_met.set()

    with api_process(own_postgres.stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        http = httpx.AsyncClient(
            base_url=api.base_url, timeout=30, event_hooks={"response": [on_response]}
        )
        async with AsyncHerald(api.base_url, key, http=http, max_retries=10) as herald:
            endpoint = await herald.endpoints.create("http://127.0.0.1:9/outage")
            await asyncio.to_thread(own_postgres.server.stop)
            creating = asyncio.create_task(herald.deliveries.create(endpoint.id, "a.b", {"n": 1}))
            await asyncio.wait_for(outage_met.wait(), timeout=60)
            assert await asyncio.to_thread(own_postgres.server.start)
            await own_postgres.engine.dispose()
            delivery = await asyncio.wait_for(creating, timeout=120)

    statuses = [status for status, _ in seen]
    assert statuses[0] == 503 and statuses[-1] == 202
    assert set(statuses) <= {503, 202}
    assert len({sent_key for _, sent_key in seen}) == 1  # every try carried the same key
    assert await count_rows(own_postgres.engine, "deliveries") == 1
    assert await count_rows(own_postgres.engine, "deliveries", "id = :d", d=delivery.id) == 1


async def test_the_client_orders_by_key_and_skips_a_halted_head(
    stack: Stack, receiver: Receiver, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        async with AsyncHerald(api.base_url, key) as herald:
            endpoint = await herald.endpoints.create(receiver.url("/keyed"), ordering="key")
            assert (endpoint.ordering, endpoint.on_dead) == ("key", "halt")
            first = await herald.deliveries.create(
                endpoint.id, "order.paid", {"n": 1}, ordering_key="order-7"
            )
            second = await herald.deliveries.create(
                endpoint.id, "order.paid", {"n": 2}, ordering_key="order-7"
            )
            other = await herald.deliveries.create(
                endpoint.id, "order.paid", {"n": 3}, ordering_key="order-8"
            )
            assert [d.stream_seq for d in (first, second, other)] == [1, 2, 1]
            assert second.next_attempt_at is None  # behind its stream's head
            status = await herald.deliveries.get(second.id)
            assert status.waiting_reason == "ordered" and status.waiting_behind == first.id
            streams = await herald.endpoints.streams(endpoint.id)
            assert [(s.ordering_key, s.head_id, s.live) for s in streams.items] == [
                ("order-7", first.id, 2),
                ("order-8", other.id, 1),
            ]
            assert (await herald.endpoints.streams(endpoint.id, halted=True)).items == []
            with pytest.raises(HeraldError) as refused:
                await herald.deliveries.skip(second.id)
            assert refused.value.status == 409


async def test_the_client_polls_a_polling_endpoint_long_and_acknowledges(
    stack: Stack, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        async with AsyncHerald(api.base_url, key) as herald:
            endpoint = await herald.endpoints.create(delivery="poll")
            assert (endpoint.delivery, endpoint.url) == ("poll", None)
            # A long poll, longer than the client's own timeout (10 s) would allow were it
            # not stretched for the wait: it answers when the delivery comes.
            waiting = asyncio.create_task(herald.endpoints.poll(endpoint.id, wait=15))
            await asyncio.sleep(0.2)
            delivery = await herald.deliveries.create(endpoint.id, "report.ready", {"r": 7})
            [read] = await waiting
            assert read.id == delivery.id and read.reads == 1
            assert verify(read.headers, read.body.encode(), endpoint.secret) == {"r": 7}
            done = await herald.endpoints.acknowledge(endpoint.id, [read.receipt])
            assert (done.acknowledged, done.expired) == ([delivery.id], [])
            assert (await herald.deliveries.get(delivery.id)).state == "succeeded"


async def test_the_client_puts_customers_and_mints_their_portal_sessions(
    stack: Stack, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        with Herald(api.base_url, key) as herald:
            made = herald.customers.put("cus_py", name="Python Ltd")
            assert (made.id, made.name) == ("cus_py", "Python Ltd")
            assert herald.customers.put("cus_py", name="Python plc").name == "Python plc"
            assert [c.id for c in herald.customers.list().items] == ["cus_py"]
            session = herald.portal_sessions.create("cus_py", capabilities=["replay"])
            assert session.capabilities == ["replay"] and "#t=hpl_" in session.url
            with pytest.raises(HeraldError) as refused:
                herald.portal_sessions.create("cus_nobody")
            assert refused.value.status == 404
            herald.portal_sessions.revoke(session.id)
        async with AsyncHerald(api.base_url, key) as herald_async:
            assert (await herald_async.customers.get("cus_py")).name == "Python plc"
            await herald_async.customers.delete("cus_py")
            with pytest.raises(HeraldError):
                await herald_async.customers.get("cus_py")
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            link = session.url.split("#t=")[1]
            opened = await http.post("/portal/api/session", json={"link": link})
            assert opened.status_code == 401 and "revoked" in opened.json()["detail"]


async def test_the_client_lists_portal_sessions_and_revokes_a_customers_or_a_keys(
    stack: Stack, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        with Herald(api.base_url, key) as herald:
            for customer in ("cus_a", "cus_b"):
                herald.customers.put(customer)
            first = herald.portal_sessions.create("cus_a")
            second = herald.portal_sessions.create("cus_a", capabilities=["replay"])
            other = herald.portal_sessions.create("cus_b")
            listed = herald.portal_sessions.list(customer_id="cus_a")
            assert [s.id for s in listed.items] == [second.id, first.id]  # newest first
            assert isinstance(listed.items[0], PortalSessionListed)
            assert [(s.status, s.capabilities) for s in listed.items] == [
                ("unopened", ["replay"]),
                ("unopened", []),
            ]
            paged = herald.portal_sessions.list(limit=2)
            assert [s.id for s in paged.items] == [other.id, second.id]
            assert paged.next_cursor is not None
            rest = herald.portal_sessions.list(limit=2, cursor=paged.next_cursor)
            assert [s.id for s in rest.items] == [first.id] and rest.next_cursor is None
            key_id = listed.items[0].api_key_id
            assert key_id is not None and key_id.startswith("key_")
            by_key = herald.portal_sessions.list(api_key_id=key_id)
            assert [s.id for s in by_key.items] == [other.id, second.id, first.id]
            assert herald.portal_sessions.revoke_all(customer_id="cus_a").revoked == 2
            # Ended already: a second ask ends none.
            assert herald.portal_sessions.revoke_all(customer_id="cus_a").revoked == 0
        async with AsyncHerald(api.base_url, key) as herald_async:
            listed_async = await herald_async.portal_sessions.list(customer_id="cus_b")
            assert [(s.id, s.status) for s in listed_async.items] == [(other.id, "unopened")]
            ended = await herald_async.portal_sessions.revoke_all(
                customer_id="cus_b", api_key_id=key_id
            )
            assert ended.revoked == 1
            every = (await herald_async.portal_sessions.list()).items
            assert {s.status for s in every} == {"revoked"} and len(every) == 3
            assert all(s.revoked_at is not None and s.opened_at is None for s in every)
            with pytest.raises(HeraldError) as unnamed:
                await herald_async.portal_sessions.revoke_all()  # whose: neither named
            assert unnamed.value.status == 422


async def test_the_client_reads_a_tenants_limits_and_an_admin_key_sets_them(
    stack: Stack, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        key = await tenant_key(api)
        with Herald(api.base_url, key) as herald, Herald(api.base_url, ADMIN_KEY) as admin:
            own = herald.limits.get()
            assert isinstance(own, Limits) and own.tenant_id.startswith("ten_")
            assert own.set_by_operator == []
            assert admin.tenants.limits(own.tenant_id) == own
            changed = admin.tenants.update_limits(own.tenant_id, max_fanout=3, accept_rate=0)
            assert (changed.max_fanout, changed.accept_rate) == (3, 0)
            assert sorted(changed.set_by_operator) == ["accept_rate", "max_fanout"]
            assert changed.max_endpoints == own.max_endpoints  # not named: unchanged
            assert herald.limits.get() == changed
            with pytest.raises(HeraldError) as refused:
                herald.tenants.limits(own.tenant_id)  # a tenant key: not an admin's
            assert refused.value.status == 403
            with pytest.raises(HeraldError) as missing:
                admin.tenants.limits("ten_" + "0" * 26)
            assert missing.value.status == 404
        async with AsyncHerald(api.base_url, ADMIN_KEY) as admin_async:
            default = await admin_async.tenants.update_limits(own.tenant_id, max_fanout=None)
            assert default.max_fanout == own.max_fanout
            assert default.set_by_operator == ["accept_rate"]
            assert await admin_async.tenants.limits(own.tenant_id) == default
        async with AsyncHerald(api.base_url, key) as herald_async:
            assert await herald_async.limits.get() == default
