"""``herald endpoints show | test``: an operator's view of one endpoint on the database of
``HERALD_DATABASE_URL``, whichever tenant's -- what it is configured with (credentials named,
never shown: no secret, key or password is printed), and a signed test event sent through its
whole path now, as ``POST /v1/endpoints/{id}/test`` sends it (nothing stored)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.cli.keys import in_session
from app.core.config import Settings


def add_parser(commands: Any) -> None:
    endpoints = commands.add_parser(
        "endpoints", help="one endpoint: what it is configured with, or a test event through it"
    ).add_subparsers(dest="endpoints_command", required=True)
    show = endpoints.add_parser("show", help="its configuration, credentials named only")
    show.add_argument("endpoint_id", help="ep_...")
    test = endpoints.add_parser("test", help="send a signed test event through its whole path")
    test.add_argument("endpoint_id", help="ep_...")


def run(settings: Settings, database_url: str, args: argparse.Namespace) -> int:
    from app.core.errors import HeraldError

    async def work(session: AsyncSession) -> int:
        if args.endpoints_command == "show":
            return await _show(session, args.endpoint_id)
        return await _test(session, args.endpoint_id, settings)

    try:
        return asyncio.run(in_session(database_url, work))
    except HeraldError as exc:
        print(f"herald endpoints {args.endpoints_command}: {exc.detail}", file=sys.stderr)
        return 1


async def _endpoint(session: AsyncSession, endpoint_id: str) -> Any:
    from app.core.errors import NotFound
    from app.endpoints.service.endpoints import get_any

    endpoint = await get_any(session, endpoint_id)
    if endpoint is None or endpoint.deleted_at is not None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def _show(session: AsyncSession, endpoint_id: str) -> int:
    from app.endpoints.schemas import EndpointOut

    endpoint = await _endpoint(session, endpoint_id)
    shown = EndpointOut.model_validate(endpoint)
    print(json.dumps({"tenant_id": endpoint.tenant_id, **shown.model_dump(mode="json")}, indent=2))
    return 0


async def _test(session: AsyncSession, endpoint_id: str, settings: Settings) -> int:
    from app.engine.service.endpoint_tester import EndpointTester
    from app.tenants.service import tenants

    endpoint = await _endpoint(session, endpoint_id)
    source = (await tenants.own(session, endpoint.tenant_id)).cloudevents_source
    tester = EndpointTester(settings, settings.key_ring())
    try:
        report = await tester.test(endpoint, source)
    finally:
        await tester.close()
    for step in report.steps:
        print(f"{step.step:<12} {step.outcome:<8} {step.detail}")
    print("delivered" if report.delivered else "not delivered")
    return 0 if report.delivered else 1
