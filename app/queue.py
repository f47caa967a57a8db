"""The arq queue as Herald uses it: job ids, serialisation, and batched publishing.

Jobs carry only a delivery id. A job id is unique per publication (outbox row or retry), so arq
never silently drops a re-publish (it refuses an id while that job's key exists), while two
publishers racing on the same outbox row collapse into one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import msgpack
from arq.connections import ArqRedis
from arq.constants import expires_extra_ms, job_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms, to_unix_ms
from redis.asyncio import ConnectionPool

DELIVER_FUNCTION = "deliver"
RECONCILE_FUNCTION = "reconcile"
REDRIVE_FUNCTION = "bulk_redrive"

# Never pickle: anyone who can write to Redis could otherwise run code in a worker.
job_serializer = partial(msgpack.packb, use_bin_type=True)
job_deserializer = partial(msgpack.unpackb, raw=False)

# SET the job only if absent, and queue it only then: a job already queued keeps its place.
_ENQUEUE_SCRIPT = """
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
  return 1
end
return 0
"""


def queue_name(region: str) -> str:
    return f"herald:queue:{region}"


def outbox_job_id(delivery_id: str, outbox_id: int) -> str:
    return f"{delivery_id}:o{outbox_id}"


def retry_job_id(delivery_id: str, attempt_number: int) -> str:
    return f"{delivery_id}:r{attempt_number}"


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


def seconds_from_now(seconds: float) -> datetime:
    return datetime.fromtimestamp(datetime.now(UTC).timestamp() + seconds, UTC)


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    delivery_id: str
    endpoint_id: str  # so the flow-control gate needs no database read
    run_at: datetime | None  # None: as soon as possible


async def publish(redis: ArqRedis, region: str, jobs: Sequence[QueuedJob]) -> None:
    """Enqueue ``jobs`` in one pipelined round trip. Raises on any Redis error: the caller
    then leaves its outbox rows unpublished, and the relay or the reconciler retries."""
    if not jobs:
        return
    script = redis.register_script(_ENQUEUE_SCRIPT)
    now_ms = timestamp_ms()
    queue = queue_name(region)
    async with redis.pipeline(transaction=False) as pipe:
        for job in jobs:
            score = max(now_ms, to_unix_ms(job.run_at)) if job.run_at else now_ms
            args = (job.delivery_id, job.endpoint_id)
            payload = serialize_job(
                DELIVER_FUNCTION, args, {}, None, now_ms, serializer=job_serializer
            )
            expires_ms = score - now_ms + expires_extra_ms
            await script(
                keys=[job_key_prefix + job.job_id, queue],
                args=[payload, expires_ms, score, job.job_id],
                client=pipe,
            )
        await pipe.execute()
