"""A tenant's portal sessions: listed by customer and by the key that minted them, ended in
bulk for either, and ended with the key -- a revoked key opens no portal through a session it
minted. A customer deleted and made again sees nothing of its earlier life."""

from __future__ import annotations

import httpx

from tests.fixtures.api import accept, new_endpoint


async def _key(
    client: httpx.AsyncClient, tenant: dict[str, str], label: str
) -> tuple[str, dict[str, str]]:
    made = await client.post("/v1/api-keys", json={"label": label}, headers=tenant)
    assert made.status_code == 201, made.text
    return made.json()["id"], {"Authorization": f"Bearer {made.json()['key']}"}


async def _session(
    client: httpx.AsyncClient, minter: dict[str, str], customer_id: str, *, opened: bool = True
) -> tuple[str, str, dict[str, str]]:
    """A session minted by ``minter``: its id, its link, and (opened) the portal's bearer."""
    minted = await client.post(
        "/v1/portal-sessions", json={"customer_id": customer_id}, headers=minter
    )
    assert minted.status_code == 201, minted.text
    link = minted.json()["url"].split("#t=", 1)[1]
    bearer: dict[str, str] = {}
    if opened:
        answer = await client.post("/portal/api/session", json={"link": link})
        assert answer.status_code == 200, answer.text
        bearer = {"Authorization": f"Bearer {answer.json()['session_token']}"}
    return minted.json()["id"], link, bearer


async def test_sessions_are_listed_by_customer_and_by_key_and_end_with_their_key(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for customer in ("acme", "globex"):
        await client.put(f"/v1/customers/{customer}", json={}, headers=tenant)
    backend_id, backend = await _key(client, tenant, "backend")
    _, other = await _key(client, tenant, "other service")
    opened_id, _, opened = await _session(client, backend, "acme")
    unopened_id, unopened_link, _ = await _session(client, backend, "globex", opened=False)
    kept_id, _, kept = await _session(client, other, "acme")

    by_key = (
        await client.get(f"/v1/portal-sessions?api_key_id={backend_id}", headers=tenant)
    ).json()
    assert {s["id"]: s["status"] for s in by_key["items"]} == {
        opened_id: "open",
        unopened_id: "unopened",
    }
    by_customer = (await client.get("/v1/portal-sessions?customer_id=acme", headers=tenant)).json()
    assert {s["id"] for s in by_customer["items"]} == {opened_id, kept_id}

    # The key revoked: every session it minted ends with it, opened or not.
    revoked = await client.post(f"/v1/api-keys/{backend_id}/revoke", headers=tenant)
    assert revoked.status_code == 200, revoked.text
    ended = await client.get("/portal/api/endpoints", headers=opened)
    assert ended.status_code == 401 and "the key that opened it" in ended.text
    late = await client.post("/portal/api/session", json={"link": unopened_link})
    assert late.status_code == 401
    assert (await client.get("/portal/api/endpoints", headers=kept)).status_code == 200
    listed = (
        await client.get(f"/v1/portal-sessions?api_key_id={backend_id}", headers=tenant)
    ).json()
    assert {s["status"] for s in listed["items"]} == {"revoked"}


async def test_a_customers_or_a_keys_running_sessions_are_ended_in_one_call(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for customer in ("acme", "globex"):
        await client.put(f"/v1/customers/{customer}", json={}, headers=tenant)
    sessions = [await _session(client, tenant, "acme") for _ in range(3)]
    _, _, other = await _session(client, tenant, "globex")

    answer = await client.post(
        "/v1/portal-sessions/revoke", json={"customer_id": "acme"}, headers=tenant
    )
    assert answer.status_code == 200 and answer.json() == {"revoked": 3}
    for _, _, bearer in sessions:
        assert (await client.get("/portal/api/endpoints", headers=bearer)).status_code == 401
    assert (await client.get("/portal/api/endpoints", headers=other)).status_code == 200
    again = await client.post(
        "/v1/portal-sessions/revoke", json={"customer_id": "acme"}, headers=tenant
    )
    assert again.json() == {"revoked": 0}  # asked twice, ended once
    nothing_named = await client.post("/v1/portal-sessions/revoke", json={}, headers=tenant)
    assert nothing_named.status_code == 422
    assert "whose sessions to end" in nothing_named.json()["detail"]


async def test_a_customer_made_again_cannot_read_its_earlier_lifes_deliveries(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    delivery_id = await accept(client, tenant, endpoint["id"])
    _, _, first_life = await _session(client, tenant, "acme")
    seen = await client.get(f"/portal/api/deliveries/{delivery_id}", headers=first_life)
    assert seen.status_code == 200, seen.text

    assert (await client.delete("/v1/customers/acme", headers=tenant)).status_code == 204
    assert (await client.put("/v1/customers/acme", json={}, headers=tenant)).status_code == 201
    _, _, second_life = await _session(client, tenant, "acme")
    unseen = await client.get(f"/portal/api/deliveries/{delivery_id}", headers=second_life)
    assert unseen.status_code == 404
    # The tenant keeps the history.
    assert (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).status_code == 200
