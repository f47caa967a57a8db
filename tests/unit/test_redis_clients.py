"""How Herald reads its Redis URLs: one Redis, or a cluster's nodes beside arq's own Redis."""

from __future__ import annotations

import pytest
from redis.asyncio import RedisCluster

from app.core.config import SettingsError, load_settings
from app.core.redis_clients import ClusterAddress, RedisClients


def test_a_cluster_url_names_its_nodes_and_credentials() -> None:
    address = ClusterAddress.parse("rediss+cluster://herald:p%40ss@node-1:6379,10.0.0.2:7000/0")
    assert address.nodes == (("node-1", 6379), ("10.0.0.2", 7000))
    assert (address.username, address.password, address.tls) == ("herald", "p@ss", True)
    assert "p@ss" not in repr(address)  # a traceback's locals never show it


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster://node-1",  # no port
        "redis+cluster://node-1:6379,node-2",
        "redis+cluster://node-1:99999",
        "redis+cluster://node-1:6379/3",  # a cluster has database 0 alone
        "redis+cluster://node-1:6379?ssl_cert_reqs=none",
    ],
)
def test_a_malformed_cluster_url_is_refused_without_repeating_it(url: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(redis_url=url, queue_redis_url="redis://queue:6379")
    assert "HERALD_REDIS_URL" in str(refused.value) and "node-1" not in str(refused.value)


def test_a_cluster_needs_a_redis_of_its_own_for_the_queue() -> None:
    with pytest.raises(SettingsError, match="HERALD_QUEUE_REDIS_URL"):
        load_settings(redis_url="redis+cluster://node-1:6379")
    with pytest.raises(SettingsError, match="HERALD_QUEUE_REDIS_URL"):
        load_settings(redis_url="redis://one:6379", queue_redis_url="redis+cluster://n:6379")


async def test_one_redis_is_one_client_and_a_cluster_two() -> None:
    one = RedisClients.open(load_settings(redis_url="redis://one:6379/0"))
    assert one.flow is one.queue
    apart = RedisClients.open(
        load_settings(redis_url="redis://one:6379/0", queue_redis_url="redis://queue:6379/0")
    )
    assert apart.flow is not apart.queue
    cluster = RedisClients.open(
        load_settings(redis_url="redis+cluster://n1:6379,n2:6379", queue_redis_url="redis://q")
    )
    assert isinstance(cluster.flow, RedisCluster) and not isinstance(cluster.queue, RedisCluster)
    for clients in (one, apart, cluster):
        await clients.aclose()  # nothing was connected: every client connects when first used
