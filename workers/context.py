"""What Herald's arq functions may use, typed: arq hands each function a dict, and this is the
one entry of it that is Herald's, built once at worker start-up."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.redis_clients import FlowRedis

_KEY = "herald"


@dataclass
class WorkerContext:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: FlowRedis
    # Work a control job started and left running (reconcile runs, bulk redrives): shutdown
    # gives it the same grace as the pump's attempts.
    background: set[asyncio.Task[None]] = field(default_factory=set)

    def as_arq_ctx(self) -> dict[str, Any]:
        return {_KEY: self}

    @staticmethod
    def of(ctx: dict[str, Any]) -> WorkerContext:
        context = ctx[_KEY]
        assert isinstance(context, WorkerContext)
        return context

    def in_background(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run ``work`` past the end of the job that started it, tracked for shutdown."""
        task = asyncio.create_task(work, name=name)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
