"""The arq queue as Herald uses it: its name per region, serialisation, and the control jobs
(reconcile runs, bulk redrives). Deliveries travel by wake-ups (app/services/wakeups.py);
``deliver`` names the shim that serves jobs an older release published (workers/deliver.py).
"""

from __future__ import annotations

from functools import partial

import msgpack
from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool

DELIVER_FUNCTION = "deliver"
RECONCILE_FUNCTION = "reconcile"
REDRIVE_FUNCTION = "bulk_redrive"

# Never pickle: anyone who can write to Redis could otherwise run code in a worker.
job_serializer = partial(msgpack.packb, use_bin_type=True)
job_deserializer = partial(msgpack.unpackb, raw=False)


def queue_name(region: str) -> str:
    return f"herald:queue:{region}"


async def enqueue_bulk_redrive(redis: ArqRedis, region: str, job_id: str) -> None:
    await redis.enqueue_job(
        REDRIVE_FUNCTION, job_id, _job_id=f"redrive:{job_id}", _queue_name=queue_name(region)
    )


async def enqueue_reconcile(redis: ArqRedis, region: str, run_id: str) -> None:
    await redis.enqueue_job(
        RECONCILE_FUNCTION, run_id, _job_id=f"reconcile:{run_id}", _queue_name=queue_name(region)
    )


def create_queue_redis(url: str, *, region: str) -> ArqRedis:
    """An ArqRedis that connects lazily: the API must start (and accept) with Redis down."""
    pool = ConnectionPool.from_url(
        url, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )
    return ArqRedis(
        pool,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        default_queue_name=queue_name(region),
    )
