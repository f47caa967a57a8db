"""The two Redis clients a process holds: the *flow* client (wake-ups, ceilings, rates, counters:
Lua scripts whose keys share a hash tag) and the *queue* client (arq's control jobs).

One Redis serves both through one client. A Redis Cluster serves the flow (``HERALD_REDIS_URL``
spelled ``redis+cluster://host:port,host:port``) while arq, which needs MULTI/EXEC with WATCH
and has no cluster support, keeps a small Redis of its own (``HERALD_QUEUE_REDIS_URL``): see
"Keys tagged by what a script spans" in docs/decisions.md.

Every client connects lazily: an API must start, and accept, while Redis is down.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import unquote

from arq.connections import ArqRedis
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import NoScriptError

from app.core import queue

if TYPE_CHECKING:  # the settings import this module to check a cluster URL
    from app.core.config import Settings

FlowRedis: TypeAlias = Redis | RedisCluster
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
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
    password: str | None
    tls: bool

    @classmethod
    def parse(cls, url: str) -> ClusterAddress:
        scheme, _, rest = url.partition("://")
        netloc = rest.split("/", 1)[0]
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


def create_cluster(url: str) -> RedisCluster:
    address = ClusterAddress.parse(url)
    cluster: RedisCluster = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
        username=address.username,
        password=address.password,
        ssl=address.tls,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        health_check_interval=30,
        # Serve the slots of the masters that answer while one is down: the cluster decides
        # (cluster-require-full-coverage) whether the others still take commands.
        require_full_coverage=False,
    )
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

    async def ping(self) -> None:
        await self.flow.ping()
        if self.queue is not self.flow:
            await self.queue.ping()

    async def aclose(self) -> None:
        await self.flow.aclose()
        if self.queue is not self.flow:
            await self.queue.aclose()


class LuaScript:
    """A Lua script run by EVALSHA, loaded only when Redis says it lacks it (after a restart,
    a failover or a FLUSHALL), on one Redis or a cluster alike: redis-py's own Script is typed
    for one Redis only, and its pipelined form asks SCRIPT EXISTS first on every call."""

    def __init__(self, redis: FlowRedis, source: str) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()  # Redis's name

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int | float] = ()) -> Any:
        try:
            return await self._evalsha(keys, args)
        except NoScriptError:
            await self.load()  # on a cluster SCRIPT LOAD goes to every master
            return await self._evalsha(keys, args)

    async def load(self) -> None:
        await cast("Awaitable[Any]", self.redis.script_load(self.source))

    def _evalsha(self, keys: Sequence[str], args: Sequence[str | int | float]) -> Awaitable[Any]:
        words = [*keys, *map(str, args)]
        return cast("Awaitable[Any]", self.redis.evalsha(self.sha, len(keys), *words))
