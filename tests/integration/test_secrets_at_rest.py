"""Every secret Herald stores is sealed (app/core/sealing.py): a dump of the database holds none of
them in plain text; `herald secrets rotate` re-seals under a new key while what was sealed
under the old one still opens; migration 0023 seals what an older release stored. (Secret
headers, sent and never shown: test_secret_headers.py.)"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx
import pytest
from alembic import command
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.migrate import alembic_config
from app.core.sealing import KeyRing, new_key, sealed_with
from devstack.embedded import postgres_bin_dir
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import herald_env
from tests.fixtures.stack import SECRET_KEYS, Stack, plain_dsn, scratch_database
from tests.fixtures.tls import Authority

REPO = Path(__file__).resolve().parents[2]
RING = KeyRing.parse(SECRET_KEYS)


async def pg_dump(database_url: str) -> bytes:
    """The whole database as `pg_dump` writes it: what a backup, or a stolen disk, holds."""
    dumped = await asyncio.create_subprocess_exec(
        str(postgres_bin_dir() / "pg_dump"),
        "--dbname",
        plain_dsn(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await dumped.communicate()
    assert dumped.returncode == 0, err.decode()
    return out


def spellings(secret: str) -> list[bytes]:
    """A signing secret as text, and its key bytes as base64 and as bytea hex."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    return [secret.encode(), secret.removeprefix("whsec_").encode(), key.hex().encode()]


def key_spellings(key_pem: str) -> list[bytes]:
    """A PEM private key as text, as any line of it, and as the raw private number."""
    key = serialization.load_pem_private_key(key_pem.encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    number = key.private_numbers().private_value
    lines = [line.encode() for line in key_pem.splitlines()[1:-1]]
    return [key_pem.encode(), *lines, number.to_bytes(32, "big"), format(number, "x").encode()]


async def test_a_dump_of_the_database_holds_no_secret_in_plain_text(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    credential = "Bearer " + secrets.token_urlsafe(24)
    client_secret = "cs-" + secrets.token_urlsafe(24)
    certificate, client_key = Authority(tmp_path / "ca").client_certificate("dumped-client")
    proxy_password = "pp-" + secrets.token_urlsafe(24)
    endpoint = await new_endpoint(
        client,
        tenant,
        url="https://127.0.0.1:9/hook",
        tls={"client_certificate": certificate, "client_key": client_key},
        egress_proxy={"url": f"http://proxy-user:{proxy_password}@127.0.0.1:3128"},
        headers={"X-Team": "billing-visible"},
        secret_headers={"X-Api-Key": credential},
        oauth2={
            "token_url": "http://127.0.0.1:9/token",
            "client_id": "herald-visible",
            "client_secret": client_secret,
        },
    )
    rotated = await client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=tenant)
    assert rotated.status_code == 200
    assert (await client.get("/console/sign-in")).status_code == 200  # makes the console's key
    async with engine.connect() as connection:
        console_key = RING.open(
            (await connection.execute(text("SELECT sealed FROM console_secrets"))).scalar_one(),
            "console:sign-in form",
        )

    dump = await pg_dump(stack.database_url)

    # What is not secret is there: the dump is of the right database, and would show a leak.
    assert endpoint["id"].encode() in dump and b"billing-visible" in dump
    assert b"herald-visible" in dump  # the OAuth2 client id is no secret; its secret is
    for secret in (endpoint["secret"], rotated.json()["secret"]):  # previous and current
        for spelling in spellings(secret):
            assert spelling not in dump
    assert credential.encode() not in dump and credential.split()[1].encode() not in dump
    assert client_secret.encode() not in dump
    assert proxy_password.encode() not in dump
    assert b"CN=dumped-client" in dump  # what identifies the certificate is shown; its key:
    for spelling in key_spellings(client_key):
        assert spelling not in dump
    assert console_key.hex().encode() not in dump and len(console_key) == 32


async def sealed_values(engine: AsyncEngine) -> list[bytes]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT secret_sealed AS v FROM endpoints"
                " UNION ALL SELECT previous_secret_sealed FROM endpoints"
                " UNION ALL SELECT secret_headers_sealed FROM endpoints"
                " UNION ALL SELECT signing_key_sealed FROM endpoints"
                " UNION ALL SELECT previous_signing_key_sealed FROM endpoints"
                " UNION ALL SELECT oauth2_secret_sealed FROM endpoints"
                " UNION ALL SELECT tls_sealed FROM endpoints"
                " UNION ALL SELECT previous_tls_sealed FROM endpoints"
                " UNION ALL SELECT sealed FROM console_secrets"
            )
        )
        return [bytes(row.v) for row in rows if row.v is not None]


async def herald(command_line: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, command_line, env=env, cwd=REPO, capture_output=True, text=True
    )


async def test_herald_secrets_rotate_reseals_everything_under_the_new_key(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    authority = Authority(tmp_path / "ca")
    endpoint = await new_endpoint(
        client,
        tenant,
        url="https://127.0.0.1:9/hook",
        secret_headers={"X-Api-Key": "k-1"},
        oauth2={"token_url": "http://127.0.0.1:9/t", "client_id": "c", "client_secret": "s"},
        tls={"ca_bundle": authority.ca_pem()},
    )
    await client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=tenant)
    replaced = {"tls": {"ca_bundle": authority.ca_pem(), "overlap_hours": 1}}
    path = f"/v1/endpoints/{endpoint['id']}"
    assert (await client.patch(path, json=replaced, headers=tenant)).status_code == 200
    for _ in range(3):
        await new_endpoint(client, tenant)
    assert (await client.get("/console/sign-in")).status_code == 200
    current = (await client.get(f"/v1/endpoints/{endpoint['id']}/secret", headers=tenant)).json()
    before = await sealed_values(engine)
    # 4 secrets, 1 previous, 1 set of secret headers, 4 ed25519 keys, 1 OAuth2 client
    # secret, TLS material and the material it replaced, the console's key
    assert {sealed_with(value) for value in before} == {"test-1"} and len(before) == 14

    newest = new_key("test-2")
    ring = f"{newest},{SECRET_KEYS}"
    env = herald_env(stack, HERALD_SECRET_KEYS=ring)
    command_line = [sys.executable, "-m", "app.cli", "secrets", "rotate", "--page", "2"]
    rotated = await herald(command_line, env)
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.startswith("re-sealed 14 secrets under 'test-2'")
    after = await sealed_values(engine)
    assert {sealed_with(value) for value in after} == {"test-2"} and len(after) == 14
    # The old key may go: every value opens under the new one alone.
    alone = KeyRing.parse(newest)
    async with engine.connect() as connection:
        sealed = (
            await connection.execute(
                text("SELECT secret_sealed FROM endpoints WHERE id = :id"), {"id": endpoint["id"]}
            )
        ).scalar_one()
    assert alone.open_text(sealed, f"endpoint:{endpoint['id']}:signing") == current["secret"]
    again = await herald(command_line, env)
    assert again.stdout.startswith("re-sealed 0 secrets")


_OLD_ENDPOINTS = """
INSERT INTO tenants (id, name) VALUES ('ten_old', 'old');
INSERT INTO endpoints (id, tenant_id, url, secret, previous_secret, previous_secret_expires_at,
                       enabled)
SELECT 'ep_old' || lpad(n::text, 4, '0'), 'ten_old', 'https://example.com/' || n,
       'whsec_plain' || n, CASE WHEN n % 2 = 0 THEN 'whsec_before' || n END,
       now() + interval '1 day', true
  FROM generate_series(1, 1200) AS n;
INSERT INTO console_secrets (purpose, secret) VALUES ('sign-in form', '\\x00112233');
"""


async def test_migration_0023_seals_what_an_older_release_stored_and_refuses_without_a_key(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"herald_sealing_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    config, dsn = alembic_config(url), plain_dsn(url)
    try:
        await asyncio.to_thread(command.upgrade, config, "0022")
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(_OLD_ENDPOINTS)
        finally:
            await connection.close()

        monkeypatch.delenv("HERALD_SECRET_KEYS", raising=False)
        with pytest.raises(ValueError, match="HERALD_SECRET_KEYS is not set"):
            await asyncio.to_thread(command.upgrade, config, "head")
        connection = await asyncpg.connect(dsn)
        try:  # nothing changed: the migration is one transaction
            assert await connection.fetchval("SELECT version_num FROM alembic_version") == "0022"
            assert await connection.fetchval(
                "SELECT secret FROM endpoints WHERE id = 'ep_old0001'"
            ) == ("whsec_plain1")
        finally:
            await connection.close()

        monkeypatch.setenv("HERALD_SECRET_KEYS", SECRET_KEYS)
        await asyncio.to_thread(command.upgrade, config, "head")
        connection = await asyncpg.connect(dsn)
        try:
            rows = await connection.fetch(
                "SELECT id, secret_sealed, previous_secret_sealed FROM endpoints ORDER BY id"
            )
            columns = await connection.fetch(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name IN ('endpoints', 'console_secrets')"
            )
            console = await connection.fetchval("SELECT sealed FROM console_secrets")
        finally:
            await connection.close()
        assert len(rows) == 1200
        for n, row in enumerate(rows, start=1):
            purpose = f"endpoint:{row['id']}:signing"
            assert RING.open_text(row["secret_sealed"], purpose) == f"whsec_plain{n}"
            previous = row["previous_secret_sealed"]
            if n % 2 == 0:
                assert RING.open_text(previous, purpose) == f"whsec_before{n}"
            else:
                assert previous is None
        assert RING.open(console, "console:sign-in form") == bytes.fromhex("00112233")
        assert not {"secret", "previous_secret"} & {c["column_name"] for c in columns}
    finally:
        await scratch_database(stack.database_url, name, create=False)


async def test_a_secret_under_a_lost_key_is_refused_in_words_and_a_rotation_replaces_it(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, secret_headers={"X-Api-Key": "k-1"})
    lost = KeyRing.parse(new_key("lost-1"))
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE endpoints SET secret_sealed = :s, secret_headers_sealed = :h WHERE id = :id"
            ),
            {
                "id": endpoint["id"],
                "s": lost.seal("whsec_lost", f"endpoint:{endpoint['id']}:signing"),
                "h": lost.seal('{"X-Api-Key": "k-1"}', f"endpoint:{endpoint['id']}:headers"),
            },
        )
    base = f"/v1/endpoints/{endpoint['id']}"

    shown = await client.get(f"{base}/secret", headers=tenant)
    assert shown.status_code == 409 and "whsec_lost" not in shown.text
    assert shown.json()["detail"] == (
        "the endpoint's signing secret is sealed under a key HERALD_SECRET_KEYS no longer "
        "holds: rotate it to make a new one"
    )
    plain_only = await client.patch(base, json={"headers": {"X-A": "b"}}, headers=tenant)
    assert plain_only.status_code == 409 and "set secret_headers again" in plain_only.text

    rotated = await client.post(f"{base}/secret/rotate", headers=tenant)
    assert rotated.status_code == 200
    # No overlap: the unreadable secret cannot sign beside the new one.
    async with engine.connect() as connection:
        overlap_over = (
            await connection.execute(
                text("SELECT previous_secret_expires_at <= now() FROM endpoints WHERE id = :id"),
                {"id": endpoint["id"]},
            )
        ).scalar_one()
    assert overlap_over is True
    assert (await client.get(f"{base}/secret", headers=tenant)).json() == {
        "secret": rotated.json()["secret"]
    }
    both = await client.patch(
        base, json={"headers": {"X-A": "b"}, "secret_headers": {"X-Api-Key": "k-2"}}, headers=tenant
    )
    assert both.status_code == 200 and both.json()["secret_header_names"] == ["X-Api-Key"]


async def test_rotate_goes_past_a_secret_it_cannot_open_and_names_it(
    client: httpx.AsyncClient, tenant: dict[str, str], stack: Stack, engine: AsyncEngine
) -> None:
    lost, kept = await new_endpoint(client, tenant), await new_endpoint(client, tenant)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET secret_sealed = :s WHERE id = :id"),
            {
                "id": lost["id"],
                "s": KeyRing.parse(new_key("gone-1")).seal("x", f"endpoint:{lost['id']}:signing"),
            },
        )
    env = herald_env(stack, HERALD_SECRET_KEYS=f"{new_key('test-2')},{SECRET_KEYS}")
    rotated = await herald([sys.executable, "-m", "app.cli", "secrets", "rotate"], env)
    assert rotated.returncode == 1
    assert f"not re-sealed: {lost['id']} secret_sealed (it does not open)" in rotated.stderr
    assert "keep the other keys until they are replaced" in rotated.stderr
    async with engine.connect() as connection:
        sealed = (
            await connection.execute(
                text("SELECT secret_sealed FROM endpoints WHERE id = :id"), {"id": kept["id"]}
            )
        ).scalar_one()
    assert sealed_with(sealed) == "test-2"  # the rest went on
