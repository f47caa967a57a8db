"""The cache every tenant shares, each with a share of it: one tenant's many entries push out
its own, never another's, and when the whole is full the tenant holding the most gives way."""

from __future__ import annotations

import time

from app.core.caches import SharedCache


def test_a_tenant_past_its_share_evicts_its_own_least_recently_used() -> None:
    cache: SharedCache[str, int] = SharedCache(per_tenant=3, total=100)
    cache.put("quiet", "q", 0)
    for n in range(1000):  # one tenant's many event types, or keys, or filters
        cache.put("noisy", f"k{n}", n)
    assert cache.get("q") == 0
    assert cache.held_by("noisy") == 3
    assert [cache.get(f"k{n}") for n in (996, 997, 998, 999)] == [None, 997, 998, 999]


def test_when_the_whole_is_full_the_tenant_holding_the_most_gives_way() -> None:
    cache: SharedCache[str, int] = SharedCache(per_tenant=10, total=12)
    for n in range(2):
        cache.put("quiet", f"q{n}", n)
    for n in range(10):
        cache.put("noisy", f"k{n}", n)
    cache.put("third", "t", 0)  # the whole is full: the noisy tenant gives up its oldest
    assert len(cache) == 12
    assert cache.get("k0") is None and cache.get("k1") == 1
    assert cache.get("q0") == 0 and cache.get("q1") == 1 and cache.get("t") == 0


def test_using_an_entry_keeps_it_and_an_expired_one_is_gone() -> None:
    cache: SharedCache[str, int] = SharedCache(per_tenant=2, total=10)
    cache.put("a", "x", 1)
    cache.put("a", "y", 2)
    assert cache.get("x") == 1  # x now the most recently used
    cache.put("a", "z", 3)
    assert cache.get("y") is None and cache.get("x") == 1
    brief: SharedCache[str, int] = SharedCache(per_tenant=2, total=10, seconds=1e-9)
    brief.put("a", "x", 1)
    time.sleep(0.001)
    assert brief.get("x") is None and len(brief) == 0
    cache.forget("x")
    assert cache.get("x") is None and cache.held_by("a") == 1
