"""deploy/nginx/herald.conf in front of a real `herald api`, as docs/operations.md tells an
operator to run it: requests and the console pass through over TLS, and nginx itself cuts off
the clients Herald should never see -- a header block sent a byte at a time, a header line too
long, a body too large. Herald's own bounds are set far wider here, so what refuses is nginx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fixtures.console_forms import hidden
from tests.fixtures.nginx import SHIPPED, Nginx, running_nginx
from tests.fixtures.processes import start_api, wait_healthy
from tests.fixtures.raw_http import GET, connection, status_of
from tests.fixtures.stack import ADMIN_KEY, Stack

# Herald would wait ten minutes for headers and take a megabyte of them: only nginx refuses.
LENIENT = {
    "HERALD_API_HEADER_TIMEOUT_SECONDS": "600",
    "HERALD_API_MAX_HEADER_BYTES": str(1024 * 1024),
}


@pytest.fixture(scope="module")
async def nginx(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Nginx]:
    logs = tmp_path_factory.mktemp("proxy")
    api = start_api(stack, logs, **LENIENT)
    try:
        await wait_healthy(api)
        async with running_nginx(api, logs / "nginx") as proxy:
            yield proxy
    finally:
        api.stop()


async def test_the_api_and_the_console_work_through_it(nginx: Nginx) -> None:
    async with httpx.AsyncClient(base_url=nginx.base_url, verify=nginx.tls) as browser:
        assert (await browser.get("/healthz")).status_code == 200
        page = await browser.get("/console/sign-in")
        # Herald believes nginx's X-Forwarded-Proto: the cookie is for HTTPS only.
        assert "secure" in page.headers["set-cookie"].lower()
        token = hidden(page.text, "form_token")
        signed_in = await browser.post(
            "/console/sign-in",
            data={"key": ADMIN_KEY, "form_token": token},
            headers={"Origin": nginx.base_url},  # the browser's page: https, this host and port
        )
        assert signed_in.status_code == 303, signed_in.text


async def test_a_header_block_sent_a_byte_at_a_time_is_cut_off_by_nginx(nginx: Nginx) -> None:
    async with connection(nginx.port, nginx.tls) as slow:
        slow.writer.write(GET + b"X-Slow: ")
        sending = asyncio.create_task(slow.trickle(b"a"))
        received = await slow.until_closed()  # client_header_timeout
        await sending
    assert received == b""  # nginx closes such a connection without an answer
    assert "client timed out" in nginx.error_log()


async def test_a_header_line_too_long_is_refused_by_nginx(nginx: Nginx) -> None:
    async with connection(nginx.port, nginx.tls) as greedy:
        greedy.writer.write(GET + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n")
        received = await greedy.until_closed()
    assert status_of(received) == 400  # past large_client_header_buffers' 8 KiB a line
    assert b"Request Header Or Cookie Too Large" in received
    assert b"server: uvicorn" not in received.lower()


async def test_a_body_too_large_is_refused_by_nginx_before_it_is_sent(nginx: Nginx) -> None:
    async with connection(nginx.port, nginx.tls) as greedy:
        greedy.writer.write(
            b"POST /v1/deliveries/batch HTTP/1.1\r\nHost: herald.test\r\n"
            b"Content-Type: application/json\r\nContent-Length: 20000000\r\n\r\n"
        )
        received = await greedy.until_closed()
    assert status_of(received) == 413  # client_max_body_size, from the declared length
    assert b"server: uvicorn" not in received.lower()


def test_the_shipped_file_marks_only_what_a_site_changes() -> None:
    # What these tests replace is what an operator must: addresses, names, certificates.
    marked = [line.split()[0] for line in SHIPPED.read_text().splitlines() if "# SITE" in line]
    assert sorted(set(marked)) == [
        "listen",
        "server",
        "server_name",
        "ssl_certificate",
        "ssl_certificate_key",
    ]


def test_the_shipped_file_holds_each_client_to_a_share_of_connections_and_requests() -> None:
    # Run as it is by every test above (nginx refuses a file it cannot read); here, that the
    # shares are there and answer as the docs say. Their effect is nginx's own.
    shipped = SHIPPED.read_text()
    for directive in (
        "limit_conn_zone $binary_remote_addr zone=herald_clients:10m;",
        "limit_req_zone $binary_remote_addr zone=herald_rate:10m rate=200r/s;",
        "limit_conn_status 503;",
        "limit_req_status 429;",
        "limit_conn herald_clients 64;",
        "limit_req zone=herald_rate burst=400 nodelay;",
    ):
        assert directive in shipped, directive
