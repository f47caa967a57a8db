"""The console across real `herald api` processes: what one issued, another accepts -- a load
balancer may send the sign-in page and its post to different ones."""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console_forms import hidden
from tests.fixtures.processes import start_api, wait_healthy
from tests.fixtures.stack import ADMIN_KEY, Stack
from tests.fixtures.waiting import count_rows


async def test_a_sign_in_form_one_api_process_issued_signs_in_at_another(
    stack: Stack, tmp_path: Path, engine: AsyncEngine
) -> None:
    apis = [start_api(stack, tmp_path), start_api(stack, tmp_path)]
    try:
        for api in apis:
            await wait_healthy(api)
        issuer, acceptor = apis
        async with httpx.AsyncClient(base_url=issuer.base_url) as browser:
            token = hidden((await browser.get("/console/sign-in")).text, "form_token")
        async with httpx.AsyncClient(base_url=acceptor.base_url) as browser:
            answer = await browser.post(
                "/console/sign-in",
                data={"key": ADMIN_KEY, "form_token": token},
                headers={"Cookie": f"herald_console_form={token}"},  # one site behind the balancer
            )
        assert answer.status_code == 303, answer.text
        assert await count_rows(engine, "console_sessions") == 1
        assert await count_rows(engine, "console_secrets") == 1  # one key, made once
    finally:
        for api in apis:
            api.stop()
