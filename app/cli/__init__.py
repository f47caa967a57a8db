"""The ``herald`` command: api, worker [--check], migrate [--check|--wait], keys
create|list|revoke, streams halted|skip|redrive, endpoints show|test, secrets new-key|rotate,
reconcile [--every], purge, partitions [--make], openapi.

The dev stack (embedded servers, the supervisor) is ``herald-dev``, from ``devstack``: nothing
here imports it."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from app import __version__
from app.cli import endpoints, keys, migrate, partitions, reconcile, secrets, streams
from app.core.config import Settings, SettingsError, load_settings
from app.core.logs import configure_logging
from app.core.sealing import KeyRingError


def _require_servers_and_keys(settings: Settings) -> None:
    """What the API and a worker cannot start without: their servers, and the key ring."""
    missing = [
        name
        for name, value in (
            ("HERALD_DATABASE_URL", settings.database_url),
            ("HERALD_REDIS_URL", settings.redis_url),
        )
        if value is None
    ]
    if missing:
        raise SettingsError(
            f"{' and '.join(missing)} must be set (or use `herald-dev` for the embedded stack)"
        )
    try:
        settings.key_ring()
    except KeyRingError as exc:
        raise SettingsError(str(exc)) from None


def _database(settings: Settings) -> str:
    """The database for a one-off command (``herald-dev <command>`` sets it to the dev stack's)."""
    if settings.database_url is None:
        raise SettingsError(
            "HERALD_DATABASE_URL must be set; for the dev stack's database run the command as "
            "`herald-dev <command>`"
        )
    return settings.async_database_url


def _cmd_api(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from app.api.connection_limits import LimitedHttpToolsProtocol

    _require_servers_and_keys(settings)
    uvicorn.run(
        "app.main:app_from_environment",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=args.workers,
        loop="uvloop",
        # httptools with the idle, header-time and header-size limits uvicorn lacks.
        http=LimitedHttpToolsProtocol,
        ws="none",  # Herald serves no WebSocket: an upgrade request is answered as plain HTTP
        timeout_keep_alive=settings.api_keep_alive_seconds,
        limit_concurrency=settings.api_max_connections,
        access_log=settings.access_log,
        log_config=None,  # app_from_environment configures structured logging per process
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=15,
    )
    return 0


def _cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    import uvloop

    from workers.runner import run_worker

    if args.check:
        from workers.heartbeat import check

        healthy, said = check(settings.worker_heartbeat_file)
        print(said, file=sys.stdout if healthy else sys.stderr)
        return 0 if healthy else 1
    _require_servers_and_keys(settings)
    uvloop.run(run_worker(settings))
    return 0


def _role() -> str:
    """What this container runs: ``HERALD_ROLE``, else the ``herald`` command of its process 1."""
    role = os.environ.get("HERALD_ROLE")
    if role:
        return role
    try:
        words = Path("/proc/1/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "api"
    known = {b"api", b"worker", b"migrate", b"reconcile"}
    return next((w.decode() for w in words if w in known), "api")


def _cmd_health(settings: Settings, args: argparse.Namespace) -> int:
    """The image's one HEALTHCHECK, fitted to the role: an API answers /healthz, a worker has
    beaten lately; a one-shot migration or the cron has nothing to serve."""
    role = _role()
    if role == "worker":
        return _cmd_worker(settings, argparse.Namespace(check=True))
    if role != "api":
        return 0
    import httpx

    try:
        answered = httpx.get(f"http://127.0.0.1:{settings.port}/healthz", timeout=2)
    except httpx.HTTPError as exc:
        print(f"the API does not answer: {exc}", file=sys.stderr)
        return 1
    return 0 if answered.status_code == 200 else 1


def _cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    return migrate.run(
        _database(settings), settings.partitions_ahead_days, settings.retention_days, args
    )


def _cmd_partitions(settings: Settings, args: argparse.Namespace) -> int:
    return partitions.run(
        _database(settings), settings.partitions_ahead_days, settings.retention_days, args
    )


def _cmd_keys(settings: Settings, args: argparse.Namespace) -> int:
    return keys.run(_database(settings), args)


async def _purge(settings: Settings, database_url: str) -> dict[str, int]:
    from app.core.db import create_engine, create_sessionmaker
    from app.operations.service.retention import purge

    engine = create_engine(database_url, pool_size=1)
    try:
        return await purge(settings, create_sessionmaker(engine), max_batches=1_000_000)
    finally:
        await engine.dispose()


def _cmd_streams(settings: Settings, args: argparse.Namespace) -> int:
    return streams.run(_database(settings), settings.region, args)


def _cmd_endpoints(settings: Settings, args: argparse.Namespace) -> int:
    return endpoints.run(settings, _database(settings), args)


def _cmd_secrets(settings: Settings, args: argparse.Namespace) -> int:
    database = settings.async_database_url if settings.database_url is not None else None
    return secrets.run(settings, database, args)


def _cmd_purge(settings: Settings, args: argparse.Namespace) -> int:
    counts = asyncio.run(_purge(settings, _database(settings)))
    print(" ".join(f"{name}={count}" for name, count in counts.items()))
    return 0


def _cmd_openapi(settings: Settings, args: argparse.Namespace) -> int:
    from app.cli.openapi import openapi_document

    sys.stdout.write(json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="herald", description="Herald webhook delivery")
    parser.add_argument("--version", action="version", version=f"herald {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    api = commands.add_parser("api", help="run the HTTP API (uvicorn)")
    api.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    worker = commands.add_parser("worker", help="run a delivery worker (arq) with the outbox relay")
    worker.add_argument(
        "--check",
        action="store_true",
        help="exit 0 if the worker in this container beat lately (its health check)",
    )
    reconcile.add_parser(commands)
    commands.add_parser("health", help="the container health check, fitted to its role")
    migrate.add_parser(commands)
    partitions.add_parser(commands)
    keys.add_parser(commands)
    streams.add_parser(commands)
    endpoints.add_parser(commands)
    secrets.add_parser(commands)
    commands.add_parser("purge", help="purge data older than HERALD_RETENTION_DAYS now")
    commands.add_parser("openapi", help="print the OpenAPI document")
    return parser


_COMMANDS = {
    "api": _cmd_api,
    "worker": _cmd_worker,
    "migrate": _cmd_migrate,
    "partitions": _cmd_partitions,
    "keys": _cmd_keys,
    "streams": _cmd_streams,
    "endpoints": _cmd_endpoints,
    "secrets": _cmd_secrets,
    "reconcile": reconcile.run,
    "health": _cmd_health,
    "purge": _cmd_purge,
    "openapi": _cmd_openapi,
}


def _quiet_libraries() -> None:
    """Keep to warnings the libraries whose INFO lines tell nothing the command does not say:
    httpx logs each request ("HTTP Request: POST ... 202 Accepted"), which reconcile and health
    report themselves; Alembic its set-up (each plugin as it is imported, the dialect,
    transactional DDL), where migrations/env.py logs each migration applied instead. Set here,
    before ``migrate`` imports Alembic; env.py sets it too, for its other callers."""
    for library in ("httpx", "alembic"):
        logging.getLogger(library).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        # To stderr, for every command.
        configure_logging(settings.log_format, settings.log_level, access_log=settings.access_log)
        _quiet_libraries()
        return _COMMANDS[args.command](settings, args)
    except SettingsError as exc:
        print(f"herald: {exc}", file=sys.stderr)
        return 2
