"""`herald-dev`: the whole service on one machine, embedded servers included, stopped cleanly.

It is a supervisor: it starts (or reuses) the databases, migrates, makes sure a dev tenant and
an admin key exist, then runs `herald api` and `herald worker` as child processes, exactly as
production would.
Every exit path -- Ctrl-C, SIGTERM, a child dying, an error -- stops everything it started.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

import httpx

from app.core.actors import CLI
from app.core.config import Settings, SettingsError
from app.core.db import create_engine, create_sessionmaker
from app.core.migrate import upgrade_to_head
from app.core.sealing import new_key
from app.tenants.repository import api_keys
from app.tenants.service.api_keys import generate_key, hash_key, issue_key_for_tenant_name
from devstack.embedded import EmbeddedPostgres, EmbeddedRedis

DEV_TENANT = "dev"
# `herald-dev` is for trying Herald against receivers on this machine, so loopback is allowed
# unless HERALD_DESTINATION_ALLOWLIST says otherwise. `herald api` has no such default.
DEV_ALLOWLIST = "127.0.0.0/8,::1/128"
_CHILD_GRACE_SECONDS = 20
_PR_SET_PDEATHSIG = 1


@dataclass
class DevCredentials:
    admin_api_key: str
    tenant_api_key: str


class DevError(Exception):
    pass


def die_with_parent() -> None:
    """Children get SIGTERM if the supervisor itself is killed (-9), so none is orphaned."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    # The first signal starts the shutdown; any further one (a second Ctrl-C, a supervisor
    # repeating SIGTERM) must not interrupt the cleanup half-way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


async def _ensure_tenant_key(database_url: str, known: str | None) -> str:
    """The dev tenant's key: ``known`` if the database still has it, else a newly issued one
    (the database was reset, or this is the first run)."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            if known is not None and await api_keys.find_principal(session, hash_key(known)):
                return known
            issued = await issue_key_for_tenant_name(session, DEV_TENANT, is_admin=False, by=CLI)
            return issued.key
    finally:
        await engine.dispose()


def _ensure_credentials(database_url: str, path: Path, settings: Settings) -> DevCredentials:
    """Dev-only: keep the printed keys in ``DATA_DIR`` (mode 0600) so a second run shows the
    same ones."""
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    admin = (
        settings.admin_api_key.get_secret_value()
        if settings.admin_api_key is not None
        else stored.get("admin_api_key") or generate_key()
    )
    tenant_key = asyncio.run(_ensure_tenant_key(database_url, stored.get("tenant_api_key")))
    path.touch(mode=0o600)
    path.write_text(json.dumps({"admin_api_key": admin, "tenant_api_key": tenant_key}))
    return DevCredentials(admin_api_key=admin, tenant_api_key=tenant_key)


def use_dev_secret_keys(data_dir: Path) -> None:
    """Dev-only: the key ring the stack's secrets are sealed under, kept in ``DATA_DIR``
    (mode 0600) beside the database it belongs to, and put in this process's environment for
    the migrations, the children and one-off commands. An exported HERALD_SECRET_KEYS wins."""
    if os.environ.get("HERALD_SECRET_KEYS"):
        return
    path = data_dir / "dev-secret-keys"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(new_key("dev-1"))
    os.environ["HERALD_SECRET_KEYS"] = path.read_text().strip()


def _lock_data_dir(data_dir: Path) -> IO[str]:
    lock = (data_dir / "dev.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise DevError(f"another `herald-dev` is already using {data_dir}") from None
    return lock


def _check_port_free(host: str, port: int) -> None:
    """Fail before anything starts or prints: with the port taken the API cannot listen, and
    a server already there may even answer our readiness probe."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: a port left in TIME_WAIT is free, one with a listener is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise DevError(
            f"port {port} on {host} is not available ({exc.strerror or exc}); set HERALD_PORT "
            f"to a free port, e.g. HERALD_PORT={port + 1 if port < 65535 else 8000} herald-dev"
        ) from None


def _wait_ready(base_url: str, api: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api.poll() is not None:
            raise DevError(f"the API process exited with status {api.returncode} at start-up")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise DevError(f"the API did not become ready at {base_url} within {timeout:.0f} s")


def _stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _CHILD_GRACE_SECONDS
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@contextmanager
def dev_stack_database(data_dir: Path) -> Iterator[str]:
    """The dev stack's database in ``data_dir``, for one-off commands (``keys create``,
    ``purge``) run with HERALD_DATABASE_URL unset.

    While `herald-dev` runs there (it holds the lock) its server is used as it is: never
    started, never stopped. Otherwise this holds the lock itself, so that no `herald-dev` starts
    on the data dir meanwhile, and starts the server only for as long as the command runs.
    """
    data_dir = data_dir.resolve()
    postgres = EmbeddedPostgres(data_dir / "postgres")
    # SettingsError: the command's own configuration is what is missing (exit status 2).
    if not postgres.initialised:
        raise SettingsError(
            f"HERALD_DATABASE_URL is not set and there is no dev stack in {data_dir}: set it, "
            "or run `herald-dev` first (HERALD_DATA_DIR says where)"
        )
    try:
        lock = _lock_data_dir(data_dir)
    except DevError:
        url = postgres.running_url()
        if url is None:
            raise SettingsError(
                f"`herald-dev` on {data_dir} has not started its database yet; try again in a "
                "moment, or set HERALD_DATABASE_URL"
            ) from None
        yield url
        return
    use_dev_secret_keys(data_dir)
    with lock, ExitStack() as cleanup:
        cleanup.callback(postgres.stop)
        url = postgres.start()
        upgrade_to_head(url)
        yield url


class ReconcileTimer:
    """`herald-dev`'s stand-in for cron: POST /v1/reconcile every RECONCILE_INTERVAL_SECONDS,
    exactly as the production crontab line does."""

    def __init__(self, base_url: str, admin_key: str, settings: Settings) -> None:
        self._url = f"{base_url}/v1/reconcile"
        self._headers = {"Authorization": f"Bearer {admin_key}"}
        self._interval = settings.reconcile_interval_seconds
        self._next = time.monotonic() + self._interval

    def tick(self) -> None:
        if self._interval <= 0 or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._interval
        try:
            httpx.post(self._url, json={"trigger": "dev-timer"}, headers=self._headers, timeout=5)
        except httpx.HTTPError as exc:
            print(f"herald-dev: reconcile trigger failed: {exc}", file=sys.stderr, flush=True)


# What this stack gives its own API and worker that a `herald` started by hand lacks (unless
# you exported them): the banner prints them as one command line, so that a process added
# beside the stack gets them too.
SHARED_SETTINGS = (
    "HERALD_DATABASE_URL",
    "HERALD_REDIS_URL",
    "HERALD_ADMIN_API_KEY",
    "HERALD_SECRET_KEYS",
    "HERALD_DESTINATION_ALLOWLIST",
)


def _banner(
    base_url: str,
    credentials: DevCredentials,
    data_dir: Path,
    embedded: bool,
    child_env: dict[str, str],
    exported: dict[str, str],
) -> str:
    where = f"{data_dir} (embedded PostgreSQL + Redis)" if embedded else "external servers"
    allowlist = child_env["HERALD_DESTINATION_ALLOWLIST"]
    # Only what this stack chose: what you exported yourself (a database URL with its password)
    # a process started from your shell has already, and is not echoed.
    settings = [
        f"{name}={shlex.quote(child_env[name])}"
        for name in SHARED_SETTINGS
        if exported.get(name) != child_env[name]
    ]
    # The `herald` of the Python running this, as `make run` has it (.venv/bin/herald).
    script = Path(sys.executable).with_name("herald")
    herald = shlex.quote(str(script)) if script.exists() else "herald"
    command = "".join(f"  {setting} \\\n" for setting in settings) + f"  {herald} worker\n"
    return (
        f"\nHerald is running at {base_url}\n"
        f"  dev tenant API key: {credentials.tenant_api_key}\n"
        f"  admin API key:      {credentials.admin_api_key}\n"
        f"  data:               {where}\n"
        f"  SSRF allowlist:     {allowlist or '(none)'}\n"
        f"  API docs:           {base_url}/docs\n"
        "The admin key, the key ring and the allowlist are settings this stack gives its own\n"
        "API and worker; no database keeps them. A `herald api` or `herald worker` you start\n"
        "beside it needs them too, or it refuses to start without the key ring, that API\n"
        "answers 401 to the admin key, and that worker, sharing this stack's queue, takes\n"
        "deliveries to loopback receivers and lets them die as destination_blocked.\n"
        "Start one so:\n" + command + "Press Ctrl-C to stop.\n"
    )


def run_dev(settings: Settings) -> int:
    data_dir = settings.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    # SIGINT too: a shell may start a background `herald-dev &` with SIGINT ignored.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    children: list[subprocess.Popen[bytes]] = []
    exported = dict(os.environ)  # what the banner need not repeat
    with ExitStack() as cleanup:
        cleanup.enter_context(_lock_data_dir(data_dir))
        use_dev_secret_keys(data_dir)
        try:
            _check_port_free(settings.host, settings.port)
            database_url = settings.database_url
            if database_url is None:
                postgres = EmbeddedPostgres(data_dir / "postgres")
                cleanup.callback(postgres.stop)
                try:
                    database_url = postgres.start()
                except Exception as exc:
                    log = data_dir / "postgres" / "log"
                    raise DevError(f"embedded PostgreSQL did not start ({exc}); see {log}") from exc
            redis_url = settings.redis_url
            if redis_url is None:
                redis = EmbeddedRedis(data_dir / "redis")
                cleanup.callback(redis.stop)
                redis_url = redis.start()
            cleanup.callback(_stop_children, children)
            upgrade_to_head(database_url)
            credentials = _ensure_credentials(
                database_url, data_dir / "dev-credentials.json", settings
            )
            env = {
                **os.environ,
                "HERALD_DATABASE_URL": database_url,
                "HERALD_REDIS_URL": redis_url,
                "HERALD_ADMIN_API_KEY": credentials.admin_api_key,
            }
            env.setdefault("HERALD_DESTINATION_ALLOWLIST", DEV_ALLOWLIST)
            env.setdefault("HERALD_LOG_FORMAT", "console")  # for people; production: JSON
            base_url = f"http://{settings.host}:{settings.port}"
            api = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "api"], env=env, preexec_fn=die_with_parent
            )
            children.append(api)
            worker = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "worker"], env=env, preexec_fn=die_with_parent
            )
            children.append(worker)
            _wait_ready(base_url, api)
            embedded = settings.database_url is None or settings.redis_url is None
            banner = _banner(base_url, credentials, data_dir, embedded, env, exported)
            print(banner, flush=True)
            timer = ReconcileTimer(base_url, credentials.admin_api_key, settings)
            while True:
                for child in children:
                    if child.poll() is not None:
                        raise DevError(f"a Herald process exited with status {child.returncode}")
                timer.tick()
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("\nherald-dev: stopping...", file=sys.stderr, flush=True)
            return 0
        except DevError as exc:
            print(f"herald-dev: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            # However we leave (an error included), nothing may interrupt the cleanup.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return 0
