"""`herald worker`: arq (control jobs), the outbox relay and the delivery pump in one process,
supervised.

arq's worker exits on any Redis connection error, so this wraps it: on loss it waits for Redis
with capped backoff (one log line per outage, not one per try) and starts a fresh worker. On
SIGTERM or SIGINT it stops taking work, lets in-flight attempts finish within the grace period,
and gives back the leases of any it had to cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from typing import Any

import aiohttp
import structlog
from arq.connections import ArqRedis
from arq.worker import Worker, func
from prometheus_client import start_http_server
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import queue, tracing
from app.core.config import Settings
from app.core.db import create_engine, create_sessionmaker
from app.core.redis_clients import FlowRedis, RedisClients
from app.core.sealing import OpenedSecrets
from app.delivery.service import operational_events
from app.engine.service import egress
from app.engine.service.attempt_runs import AttemptRuns
from app.engine.service.attempts import Attempts
from app.engine.service.client_tls import ClientContexts
from app.engine.service.deadlines import cancel_until_done
from app.engine.service.http_client import HttpClient
from app.engine.service.http_session import build_http_session
from app.engine.service.pump import Pump
from app.engine.service.recorder import Recorder
from app.engine.service.tokens import Tokens
from app.flow.service.gate import Gate
from app.flow.service.wakeups import Wakeups
from app.outbox.service.relay import run_relay
from workers import heartbeat
from workers.context import WorkerContext
from workers.jobs import bulk_redrive, reconcile

log = structlog.get_logger("herald.worker")

# arq runs only control jobs (reconcile runs, bulk redrives), whose latency does not matter:
# an idle poll every 10 ms cost two idle workers ~10 % of a core, every 100 ms ~3 %.
POLL_DELAY_SECONDS = 0.1
HEALTH_CHECK_SECONDS = 30
MAX_RECONNECT_DELAY_SECONDS = 10.0
# arq's timeout for every job: each ends by itself well within it (reconcile and bulk redrive
# hand their work to the background at once), so arq never times one out (design.md,
# invariant 8). The margin is for an event loop that runs late.
JOB_TIMEOUT_SECONDS = 15.0


def build_pump(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    http: aiohttp.ClientSession,
    client: HttpClient,
    gate: Gate,
) -> Pump:
    """The delivery engine: each part built once, here, and handed to the parts that use it
    (the pump, its attempts' runs and the recorder share one set of wake-ups and one gate)."""
    wakeups = Wakeups(redis, settings.region)
    recorder = Recorder(settings, sessionmaker, gate, wakeups, batch_max=settings.record_batch_max)
    ring = settings.key_ring()
    opened = OpenedSecrets(ring)
    proxy = egress.from_settings(settings)
    allowlist, timeout = settings.destination_allowlist, settings.request_timeout_seconds
    tokens = Tokens(http, opened, allowlist, timeout, proxy)
    attempts = Attempts(settings, client, gate, opened, tokens, ClientContexts(ring), proxy)
    runs = AttemptRuns(settings, sessionmaker, gate, attempts, recorder, wakeups)
    pump = Pump(settings, sessionmaker, redis, gate, wakeups, runs, recorder)
    recorder.continue_streams_with(pump)  # ordered streams go on without a wake-up
    return pump


def build_worker(settings: Settings, redis: ArqRedis, ctx: dict[str, Any]) -> Worker:
    return Worker(
        functions=[
            # Never retried by arq: cron triggers the next run anyway.
            func(reconcile, name=queue.RECONCILE_FUNCTION, keep_result=0, max_tries=1),
            func(bulk_redrive, name=queue.REDRIVE_FUNCTION, keep_result=0, max_tries=1),
        ],
        queue_name=queue.queue_name(settings.region),
        redis_pool=redis,
        handle_signals=False,  # shutdown is ours: finish in-flight attempts, release leases
        max_jobs=settings.worker_concurrency,
        job_timeout=JOB_TIMEOUT_SECONDS,
        keep_result=0,  # arq refuses a job id while its result key exists
        poll_delay=POLL_DELAY_SECONDS,
        queue_read_limit=max(settings.worker_concurrency * 2, 100),
        health_check_interval=HEALTH_CHECK_SECONDS,
        job_serializer=queue.job_serializer,
        job_deserializer=queue.job_deserializer,
        ctx=ctx,
        log_results=False,
    )


async def _drain(worker: Worker, grace: float) -> None:
    """Stop taking jobs; give in-flight ones ``grace`` seconds, then cancel the rest."""
    worker.allow_pick_jobs = False
    running = [task for task in worker.tasks.values() if not task.done()]
    if running:
        log.info("worker.draining", in_flight=len(running), grace_seconds=grace)
        _, pending = await asyncio.wait(running, timeout=grace)
        # Once: a cancelled attempt's shielded cleanup (release the lease, or record what was
        # sent) must be left to finish, and it is bounded by the lease.
        for task in pending:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    if worker.main_task is not None:
        await cancel_until_done(worker.main_task)


async def _wait_for_redis(redis: ArqRedis, stop: asyncio.Event) -> None:
    delay = 0.25
    while not stop.is_set():
        try:
            await redis.ping()
            return
        except Exception:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            delay = min(MAX_RECONNECT_DELAY_SECONDS, delay * 2)


async def supervise(
    settings: Settings, redis: ArqRedis, ctx: dict[str, Any], pump: Pump, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        worker = build_worker(settings, redis, ctx)
        run = asyncio.create_task(worker.async_run(), name="arq-worker")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            # One grace for all: reconcile runs in the background finish (or are cut short)
            # alongside the attempts, not after them.
            herald = WorkerContext.of(ctx)
            await asyncio.gather(
                _drain(worker, settings.shutdown_grace),
                _finish_background(herald.background, settings.shutdown_grace),
                pump.drain(settings.shutdown_grace),
            )
            await asyncio.gather(run, return_exceptions=True)
            return
        stopping.cancel()
        error = run.exception() if not run.cancelled() else None
        log.warning("worker.redis_lost", error=type(error).__name__, action="reconnecting")
        # Jobs already running keep going (the pump's attempts are no arq jobs, and their
        # results go to PostgreSQL); only arq's bookkeeping for them is lost with Redis.
        leftovers = [t for t in worker.tasks.values() if not t.done()]
        await _wait_for_redis(redis, stop)
        await asyncio.gather(*leftovers, return_exceptions=True)
        if not stop.is_set():
            log.info("worker.redis_reconnected")


async def _finish_background(tasks: set[asyncio.Task[None]], grace: float) -> None:
    """Reconcile runs get the same grace as attempts; a run cut short records itself failed."""
    running = list(tasks)
    if not running:
        return
    _, pending = await asyncio.wait(running, timeout=grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


async def run_worker(settings: Settings) -> None:
    if settings.database_url is None or settings.redis_url is None:
        raise ValueError("the worker needs HERALD_DATABASE_URL and HERALD_REDIS_URL")
    tracing.configure("herald-worker")
    if settings.worker_metrics_port:
        # This process's counters (attempts, durations, deferrals, reconcile rows).
        start_http_server(settings.worker_metrics_port, addr=settings.host)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    engine = create_engine(settings.async_database_url, pool_size=settings.db_pool_size)
    sessionmaker = create_sessionmaker(engine)
    clients = RedisClients.open(settings)
    redis = clients.flow
    http = build_http_session(
        settings.destination_allowlist,
        settings.worker_concurrency,
        egress.from_settings(settings),
        user_agent=settings.user_agent,
    )
    # Attempts' own client; the session above serves OAuth2 token requests.
    client = HttpClient(settings.destination_allowlist, settings.worker_concurrency)
    gate = Gate(settings, sessionmaker, redis)
    pump = build_pump(settings, sessionmaker, redis, http, client, gate)
    pump.start()
    relay = asyncio.create_task(run_relay(sessionmaker, redis, settings, stop), name="relay")
    telling = asyncio.create_task(
        operational_events.run_relay(sessionmaker, redis, settings, stop), name="operational"
    )
    beating = asyncio.create_task(heartbeat.beat(settings.worker_heartbeat_file, stop))
    herald = WorkerContext(settings, sessionmaker, redis)
    ctx = herald.as_arq_ctx()
    # What lives as long as the process, out of every full collection's walk (app/main.py).
    gc.freeze()
    log.info("worker.started", region=settings.region, concurrency=settings.worker_concurrency)
    try:
        await supervise(settings, clients.queue, ctx, pump, stop)
    finally:
        stop.set()
        await asyncio.gather(relay, telling, beating, return_exceptions=True)
        await _finish_background(herald.background, settings.shutdown_grace)
        await pump.drain(settings.shutdown_grace)  # a no-op after a normal stop
        client.close()
        await http.close()
        await clients.aclose()
        await engine.dispose()
        log.info("worker.stopped")
