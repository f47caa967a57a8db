"""A destination's flow state as the API and the console handle it, outside any grant: what it is
now (for a delivery's or an endpoint's explanation), cleared when an endpoint is re-enabled, and
a wake-up now. Each is best effort: what Redis cannot say or do is logged, never raised.
"""

from __future__ import annotations

import structlog

from app.core.redis_clients import FlowRedis, LuaScript
from app.flow.service import gate_scripts
from app.flow.service.delivery_rates import DeliveryRates
from app.flow.service.gate_scripts import flow_keys
from app.flow.service.rates import RATE_HORIZON_US
from app.flow.service.snapshot import FlowSnapshot
from app.flow.service.wakeups import Arm, Wakeups

log = structlog.get_logger("herald.flow")


async def flow_snapshot(
    redis: FlowRedis, endpoint_id: str, max_in_flight: int, tenant_id: str | None = None
) -> FlowSnapshot | None:
    """What the gate would see now (and the tenant's delivery rate, when ``tenant_id`` is
    given); None if Redis cannot say."""
    try:
        keys = flow_keys(endpoint_id)
        snapshot = LuaScript(redis, gate_scripts.SNAPSHOT)
        live, wait_us = await snapshot(keys=[keys.tat, keys.slots])
        tenant_wait = 0.0
        if tenant_id is not None:
            tenant_wait = await DeliveryRates(redis, RATE_HORIZON_US).wait(tenant_id)
    except Exception as exc:
        log.warning("flow.snapshot_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
        return None
    return FlowSnapshot(int(live), max_in_flight, int(wait_us) / 1e6, tenant_wait=tenant_wait)


async def clear_flow_state(
    redis: FlowRedis, endpoint_id: str, *, tenant_id: str, region: str
) -> None:
    """A re-enabled endpoint starts afresh: no pause, no probe in the way, and its destination
    woken now (it may be parked until the old pause's end). Best effort: a leftover pause
    expires by itself, and reconcile arms the destination of any live delivery."""
    keys = flow_keys(endpoint_id)
    try:
        await redis.delete(keys.pause, keys.probe)
        await Wakeups(redis, region).arm([Arm(tenant_id, endpoint_id, 0.0)])
    except Exception as exc:
        log.warning("flow.clear_failed", endpoint_id=endpoint_id, error=type(exc).__name__)


async def wake_destination(
    redis: FlowRedis, endpoint_id: str, *, tenant_id: str, region: str
) -> None:
    """Look at the destination now (best effort: reconcile arms any destination with due work,
    and an arm only ever moves a wake-up earlier)."""
    try:
        await Wakeups(redis, region).arm([Arm(tenant_id, endpoint_id, 0.0)])
    except Exception as exc:
        log.warning("flow.wake_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
