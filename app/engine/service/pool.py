"""The attempts' connections kept open between requests, by route (connections.py, made by
http_client.py)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable, Sequence

from app.engine.service.connections import Connection

# An idle connection kept longer than this is closed rather than reused: receivers close idle
# connections on their own clock (uvicorn after 5 s, nginx 75 s), and a request written on a
# connection the receiver is closing is one whose fate is unknown.
IDLE_SECONDS = 4.0

Connect = Callable[[], Awaitable[Connection]]


class Pool:
    """Connections kept open between requests, by route. At most ``limit`` are open at once
    (0: no limit), idle ones counted: a request that finds none free closes the connection
    idle longest, or waits for one to end."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._open = 0
        self._idle: dict[Hashable, list[Connection]] = {}
        self._idle_order: OrderedDict[Connection, None] = OrderedDict()  # longest idle first
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, keys: Sequence[Hashable], connect: Connect) -> Connection:
        """An idle connection under one of ``keys`` (the routes the request may take, each
        naming the address a connection was made to), the last one used (so few stay warm),
        or a new one from ``connect``, which keys it by where it connected -- once there is
        room: a connection idle for another route is closed to make it, or else the request
        waits for one to be released."""
        self._close_stale(asyncio.get_running_loop().time())
        while True:
            for key in keys:
                while (connection := self._take_idle(key)) is not None:
                    if connection.reusable_idle:
                        return connection
                    connection.close()
                    self._forget(connection)
            if not self._limit or self._open < self._limit:
                break
            if self._idle_order:
                self._evict()
                continue
            await self._released()
        self._open += 1
        try:
            connection = await connect()
        except BaseException:
            self._open -= 1
            self._wake()
            raise
        return connection

    def release(self, connection: Connection) -> None:
        """Done with ``connection``: kept if its answer was read whole and the receiver keeps
        it open, closed otherwise (a request abandoned half-way is never reused)."""
        if not connection.reusable:
            connection.close()
            self._forget(connection)
            return
        connection.idle(asyncio.get_running_loop().time())
        self._idle.setdefault(connection.key, []).append(connection)
        self._idle_order[connection] = None
        self._wake()  # one waiting for room takes it, or closes it to make its own

    def close(self) -> None:
        while self._idle_order:
            self._evict()

    async def _released(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken and cancelled at once: the turn passes on
            raise

    def _evict(self) -> None:
        connection, _ = self._idle_order.popitem(last=False)
        idle = self._idle[connection.key]
        idle.remove(connection)
        if not idle:
            del self._idle[connection.key]
        connection.close()
        self._forget(connection)

    def _close_stale(self, now: float) -> None:
        while self._idle_order:
            oldest = next(iter(self._idle_order))
            if now - oldest.idle_since < IDLE_SECONDS and not oldest.closed:
                return
            self._evict()

    def _take_idle(self, key: Hashable) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        connection = idle.pop()
        if not idle:
            del self._idle[key]
        del self._idle_order[connection]
        return connection

    def _forget(self, connection: Connection) -> None:
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
