"""Mutual TLS, against a real TLS receiver on 127.0.0.1 that requires a client certificate from
its CA (tests/fixtures/tls.py): the certificate presented on every attempt and the receiver's
own CA trusted, the key never shown, bad material refused at save naming the field; and a
replacement the receiver does not trust yet falls back to the material it replaced for the
overlap -- under TLS 1.3, where the refusal comes only after the request was written, and
under TLS 1.2, where it fails the handshake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply, running_receiver
from tests.fixtures.tls import Authority, server_context
from tests.fixtures.waiting import attempts_of, eventually, wait_state


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    """The receiver's CA: it signed the server's certificate and the clients it trusts."""
    return Authority(tmp_path / "receiver-ca")


@pytest.fixture
def stranger(tmp_path: Path) -> Authority:
    """A CA the receiver does not trust."""
    return Authority(tmp_path / "stranger-ca")


@pytest.fixture
async def receiver(authority: Authority) -> AsyncIterator[Receiver]:
    context = server_context(authority, [], client_authority=authority)
    async with running_receiver(context) as running:
        yield running


def tls(authority: Authority, client: Authority, name: str, **more: Any) -> dict[str, Any]:
    cert, key = client.client_certificate(name)
    return {"client_certificate": cert, "client_key": key, "ca_bundle": authority.ca_pem(), **more}


def url(receiver: Receiver, path: str) -> str:
    return f"https://127.0.0.1:{receiver.port}{path}"


async def test_the_client_certificate_goes_on_every_attempt_and_its_key_is_never_shown(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authority: Authority,
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    material = tls(authority, authority, "billing-sender")
    endpoint = await new_endpoint(client, tenant, url=url(receiver, "/mtls"), tls=material)
    shown = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    for text in (str(endpoint), shown.text):
        assert material["client_key"].splitlines()[1] not in text
    facts = shown.json()["tls"]
    assert facts["client_certificate"]["subject"] == "CN=billing-sender"
    assert facts["ca_bundle"] == {"certificates": 1, "subjects": ["CN=Herald test CA"]}
    assert facts["previous_client_certificate"] is None

    ids = await post_deliveries(client, tenant, endpoint["id"], 5)
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")
    assert [r.client_name for r in receiver.on("/mtls")] == ["billing-sender"] * 5


async def test_without_a_client_certificate_the_receiver_refuses_the_connection(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authority: Authority,
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    # Its CA trusted, but no certificate to present: the receiver refuses every attempt.
    endpoint = await new_endpoint(
        client, tenant, url=url(receiver, "/bare"), tls={"ca_bundle": authority.ca_pem()}
    )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        [attempt, *_] = await eventually(
            lambda: attempts_of(engine, delivery), lambda found: len(found) >= 1
        )
    assert attempt["status_code"] is None
    assert attempt["outcome"] in {"unknown", "retryable"}  # TLS 1.3: after writing
    assert receiver.on("/bare") == []


@pytest.mark.parametrize("max_tls12", [False, True], ids=["tls1.3", "tls1.2"])
async def test_a_replacement_not_yet_trusted_falls_back_to_the_replaced_for_the_overlap(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authority: Authority,
    stranger: Authority,
    settings: Settings,
    engine: AsyncEngine,
    max_tls12: bool,
) -> None:
    context = server_context(authority, [], client_authority=authority, max_tls12=max_tls12)
    async with running_receiver(context) as receiver:
        endpoint = await new_endpoint(
            client, tenant, url=url(receiver, "/rotating"), tls=tls(authority, authority, "old")
        )
        path = f"/v1/endpoints/{endpoint['id']}"
        # The new certificate is from a CA the receiver does not trust (yet).
        replaced = await client.patch(
            path, json={"tls": tls(authority, stranger, "new", overlap_hours=2)}, headers=tenant
        )
        assert replaced.status_code == 200, replaced.text
        facts = replaced.json()["tls"]
        assert facts["client_certificate"]["subject"] == "CN=new"
        assert facts["previous_client_certificate"]["subject"] == "CN=old"
        assert facts["previous_expires_at"] is not None

        async with pump(settings, engine) as (running, _):
            running.start()
            [first] = await post_deliveries(client, tenant, endpoint["id"], 1)
            await wait_state(engine, first, "succeeded")
            # No overlap this time: the untrusted one alone, and the receiver refuses it.
            again = {"tls": tls(authority, stranger, "newer", overlap_hours=0)}
            assert (await client.patch(path, json=again, headers=tenant)).status_code == 200
            [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
            [refused, *_] = await eventually(
                lambda: attempts_of(engine, second), lambda found: len(found) >= 1
            )

    assert [r.client_name for r in receiver.on("/rotating")] == ["old"]  # by the fallback
    assert [a["outcome"] for a in await attempts_of(engine, first)] == ["success"]
    assert refused["status_code"] is None and refused["outcome"] in {"unknown", "retryable"}


async def test_bad_material_is_refused_at_save_naming_the_field_and_quoting_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], authority: Authority, stranger: Authority
) -> None:
    good = tls(authority, authority, "a")
    _, other_key = authority.client_certificate("b")
    https = "https://127.0.0.1:9/hook"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": https, "tls": {**good, "client_key": other_key}}, "client_key is not the key"),
        ({"url": https, "tls": {**good, "client_certificate": "hello"}}, "not PEM certificates"),
        ({"url": https, "tls": {"client_key": good["client_key"]}}, "go together"),
        ({"url": https, "tls": {**good, "ca_bundle": "x" * 70_000}}, "ca_bundle"),
        ({"url": "http://127.0.0.1:9/hook", "tls": good}, "tls is for https URLs"),
    ]
    for body, expected in cases:
        answer = await client.post("/v1/endpoints", json=body, headers=tenant)
        assert answer.status_code == 422, (expected, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert expected in answer.text, answer.text
        assert good["client_key"].splitlines()[1] not in answer.text
        assert other_key.splitlines()[1] not in answer.text

    endpoint = await new_endpoint(client, tenant, url=https, tls=good)
    path = f"/v1/endpoints/{endpoint['id']}"
    # Another origin: the material was set for the old one, so the change must say.
    to_http = await client.patch(path, json={"url": "http://127.0.0.1:9/x"}, headers=tenant)
    assert to_http.status_code == 422 and "tls were set for the old one" in to_http.text
    restated = {"url": "http://127.0.0.1:9/x", "tls": good}
    to_http = await client.patch(path, json=restated, headers=tenant)
    assert to_http.status_code == 422 and "tls is for https URLs" in to_http.text
    removed = await client.patch(path, json={"tls": None}, headers=tenant)
    assert removed.status_code == 200 and removed.json()["tls"] is None
    now_http = await client.patch(path, json={"url": "http://127.0.0.1:9/x"}, headers=tenant)
    assert now_http.status_code == 200


async def test_the_endpoint_test_presents_the_current_certificate(
    client: httpx.AsyncClient, tenant: dict[str, str], authority: Authority, receiver: Receiver
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=url(receiver, "/tested"), tls=tls(authority, authority, "tester")
    )
    answer = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["delivered"] is True
    steps = {step["step"]: step for step in report["steps"]}
    assert steps["tls"]["outcome"] == "ok"
    assert "CN=tester" in steps["tls"]["detail"]
    assert [r.client_name for r in receiver.on("/tested")] == ["tester"]


async def test_the_fallback_never_brings_back_a_ca_bundle_the_replacement_dropped(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authority: Authority,
    stranger: Authority,
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """The receiver's certificate is from `authority`; the replacement trusts `stranger` only:
    the receiver fails Herald's check, and the replaced bundle is no way around that."""
    endpoint = await new_endpoint(
        client, tenant, url=url(receiver, "/distrusted"), tls=tls(authority, authority, "old")
    )
    replaced = {"tls": tls(stranger, authority, "new", overlap_hours=2)}
    path = f"/v1/endpoints/{endpoint['id']}"
    assert (await client.patch(path, json=replaced, headers=tenant)).status_code == 200
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        [attempt, *_] = await eventually(
            lambda: attempts_of(engine, delivery), lambda found: len(found) >= 1
        )
    assert receiver.on("/distrusted") == []
    assert attempt["outcome"] == "retryable" and "certificate verify failed" in attempt["error"]


async def test_an_answer_herald_cannot_read_is_not_sent_again_with_the_fallback(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authority: Authority,
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """During an overlap, a receiver that took the request and answered something aiohttp
    cannot parse (a header over its limit) is not asked again: that is no refused certificate."""
    endpoint = await new_endpoint(
        client, tenant, url=url(receiver, "/garbled"), tls=tls(authority, authority, "old")
    )
    replaced = {"tls": tls(authority, authority, "new", overlap_hours=2)}
    path = f"/v1/endpoints/{endpoint['id']}"
    assert (await client.patch(path, json=replaced, headers=tenant)).status_code == 200
    receiver.script("/garbled", Reply(headers={"X-Huge": "x" * 9000}))
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        [attempt, *_] = await eventually(
            lambda: attempts_of(engine, delivery), lambda found: len(found) >= 1
        )
        arrived = [r.client_name for r in receiver.on("/garbled")]
    assert arrived[0] == "new" and "old" not in arrived  # the fallback was not tried
    assert attempt["outcome"] == "unknown"
