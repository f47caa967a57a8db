"""The two Redis clients a process holds: the *flow* client (wake-ups, ceilings, rates, counters:
Lua scripts whose keys share a hash tag) and the *queue* client (arq's control jobs).

One Redis serves both through one client. A Redis Cluster serves the flow (``HERALD_REDIS_URL``
spelled ``redis+cluster://host:port,host:port``) while arq, which needs MULTI/EXEC with WATCH
and has no cluster support, keeps a small Redis of its own (``HERALD_QUEUE_REDIS_URL``): see
"Keys tagged by what a script spans" in docs/decisions.md.

Every client connects lazily: an API must start, and accept, while Redis is down.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import unquote

from arq.connections import ArqRedis
from redis._parsers import AsyncCommandsParser
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from app.core import queue

if TYPE_CHECKING:  # the settings import this module to check a cluster URL
    from app.core.config import Settings

FlowRedis: TypeAlias = Redis | RedisCluster
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
RESTART_PAUSE_SECONDS = 1.0
SOCKET_TIMEOUT_SECONDS = 5.0  # above the takers' longest BLPOP (1 s), below a stuck request's
CONNECT_TIMEOUT_SECONDS = 2.0


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEMES)


@dataclass(frozen=True)
class ClusterAddress:
    """What ``redis+cluster://[user:password@]host:port[,host:port…]`` names: nodes to start
    from (the client learns the others and the slot map from any one of them)."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None = field(repr=False)
    tls: bool

    @classmethod
    def parse(cls, url: str) -> ClusterAddress:
        scheme, _, rest = url.partition("://")
        netloc, _, path = rest.partition("/")
        if "?" in rest or path not in ("", "0"):
            raise ValueError(
                "a Redis Cluster URL names nodes only: a cluster has database 0 alone, and"
                " takes no options in the URL"
            )
        credentials, _, hosts = netloc.rpartition("@")
        username, _, password = credentials.partition(":")
        nodes = []
        for part in hosts.split(","):
            host, _, port = part.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(
                    "a Redis Cluster URL lists its nodes as host:port, comma separated"
                )
            nodes.append((host.strip("[]"), int(port)))
        return cls(
            nodes=tuple(nodes),
            username=unquote(username) or None,
            password=unquote(password) or None,
            tls=scheme == "rediss+cluster",
        )


class _CommandTable(AsyncCommandsParser):
    """redis-py's key finder, which learns the command table (COMMAND) once, from any master.

    redis-py asks it again of one node, the first master, each time the client starts over
    after a connection error: with that master down every command failed, the other masters'
    too. The table is the server build's, the same on every node and every reconnect."""

    def __init__(self, cluster: RedisCluster) -> None:
        super().__init__()
        self._cluster = cluster

    async def initialize(self, node: ClusterNode | None = None) -> None:
        if getattr(self, "commands", None):
            return
        first = [node] if node is not None else []
        masters = self._cluster.get_primaries()
        failure: Exception | None = None
        for candidate in [*first, *(m for m in masters if m is not node)]:
            try:
                await super().initialize(candidate)
                return
            except (RedisError, OSError) as exc:
                failure = exc
        raise failure or RedisError("no master answered COMMAND")


class _Cluster(RedisCluster):
    """redis-py's cluster client, which always has the configured nodes to start over from.

    On each connection error redis-py drops the failing node from the nodes it starts from and
    starts over, closing every node's connections -- the healthy masters' commands in flight
    too, which then fail and drop their nodes in turn. Under load, with one master down, that
    emptied the list ("cannot be connected ... reachable node: None") and nothing was served
    again, the live masters' slots included."""

    def __init__(self, seeds: Sequence[tuple[str, int]], **kwargs: Any) -> None:
        super().__init__(startup_nodes=[ClusterNode(h, p) for h, p in seeds], **kwargs)
        self._seeds = tuple(seeds)
        self._starting = asyncio.Lock()
        self._failed: tuple[float, Exception] | None = None

    async def initialize(self) -> RedisCluster:
        """Start over from the configured nodes. A start that failed within the last
        RESTART_PAUSE_SECONDS is reported at once to the callers queued behind it, instead of
        each trying again in turn (behind a node that times out, the k-th waited k starts)."""
        if not self._initialize:
            return self
        async with self._starting:
            if not self._initialize:
                return self
            now = asyncio.get_running_loop().time()
            if self._failed is not None and now - self._failed[0] < RESTART_PAUSE_SECONDS:
                raise self._failed[1]
            manager = self.nodes_manager
            for host, port in self._seeds:
                node = ClusterNode(host, port, **manager.connection_kwargs)
                manager.startup_nodes.setdefault(node.name, node)
            try:
                await super().initialize()
            except RuntimeError as exc:  # redis-py iterating nodes another failure removes
                self._failed = (now, RedisClusterException(f"cluster start-over: {exc}"))
                raise self._failed[1] from exc
            except Exception as exc:
                self._failed = (now, exc)
                raise
            self._failed = None
            return self


def create_cluster(url: str) -> RedisCluster:
    address = ClusterAddress.parse(url)
    # redis-py's typing declares connection_pool on its shared base; a cluster has none.
    cluster = _Cluster(  # type: ignore[abstract]
        address.nodes,
        username=address.username,
        password=address.password,
        ssl=address.tls,
        ssl_check_hostname=address.tls,  # redis-py's cluster client checks no name by default
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        health_check_interval=30,
        # A slot whose master stopped answering is the only one that fails: the others' keep
        # being served while the cluster (cluster-require-full-coverage) says they may.
        require_full_coverage=False,
        # A lost connection is tried once more, after the client has learnt the slots again
        # (a failover moved them), and not at the node level too (redis-py's default would
        # try each command 4 x 4 times). One, not none: redis-py's cluster pipeline
        # runs `cluster_error_retry_attempts` times, so 0 would never send it. A script whose
        # reply was lost may so run twice; what it holds or counts expires by itself.
        # Redirections (MOVED, ASK, TRYAGAIN) are followed regardless.
        cluster_error_retry_attempts=1,
        connection_error_retry_attempts=0,
    )
    cluster.commands_parser = _CommandTable(cluster)
    return cluster


@dataclass(frozen=True)
class RedisClients:
    flow: FlowRedis
    queue: ArqRedis

    @classmethod
    def open(cls, settings: Settings) -> RedisClients:
        assert settings.redis_url is not None
        redis_url, queue_url, region = settings.redis_url, settings.queue_redis_url, settings.region
        if is_cluster_url(redis_url):
            if queue_url is None:
                raise ValueError("a Redis Cluster needs HERALD_QUEUE_REDIS_URL for arq's queue")
            return cls(
                create_cluster(redis_url), queue.create_queue_redis(queue_url, region=region)
            )
        arq = queue.create_queue_redis(queue_url or redis_url, region=region)
        if queue_url is None or queue_url == redis_url:
            return cls(arq, arq)
        return cls(queue.create_queue_redis(redis_url, region=region), arq)

    async def aclose(self) -> None:
        await self.flow.aclose()
        if self.queue is not self.flow:
            await self.queue.aclose()


async def ping(redis: FlowRedis) -> None:
    """Every master of a cluster answers (as one Redis must). Each on a connection of the
    ping's own: through the client, a master that fails would make it start over, closing
    every connection, and a node's own pool keeps the connections a failure leaves."""
    if isinstance(redis, RedisCluster):
        await redis.initialize()
        answers = await asyncio.gather(
            *(_ping_node(master) for master in redis.get_primaries()), return_exceptions=True
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
    else:
        await redis.ping()


async def _ping_node(node: ClusterNode) -> None:
    connection = node.connection_class(**node.connection_kwargs)
    try:
        await connection.send_command("PING")  # connects first
        await connection.read_response()
    finally:
        await connection.disconnect()


class LuaScript:
    """A Lua script run by EVALSHA, sent whole (EVAL) only when the node says it lacks it
    (after a restart, a failover or a SCRIPT FLUSH); EVAL goes where the keys are and leaves
    the script cached there, where SCRIPT LOAD would need every master of a cluster up. On one
    Redis or a cluster alike: redis-py's own Script is typed for one Redis only, and its
    pipelined form asks SCRIPT EXISTS first on every call."""

    def __init__(self, redis: FlowRedis, source: str) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()  # Redis's name

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int | float] = ()) -> Any:
        words = [*keys, *map(str, args)]
        try:
            return await cast("Awaitable[Any]", self.redis.evalsha(self.sha, len(keys), *words))
        except NoScriptError:
            return await cast("Awaitable[Any]", self.redis.eval(self.source, len(keys), *words))
