"""A missing cron is visible: the age of the region's last successful reconcile run is a metric,
and /readyz says it in words -- without failing readiness for it."""

from __future__ import annotations

import math

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.api import reconcile_now
from tests.fixtures.database import sql
from tests.fixtures.observed import sample
from tests.fixtures.stack import ADMIN, client_for

AGE = "herald_reconcile_last_success_age_seconds"


async def test_the_last_reconcile_runs_age_shows_a_missing_cron(
    settings: Settings, engine: AsyncEngine
) -> None:
    uncached = settings.model_copy(update={"metrics_cache_seconds": 0})
    app = create_app(uncached)
    async with app.router.lifespan_context(app), client_for(app) as client:

        async def age() -> float:
            body = (await client.get("/metrics", headers=ADMIN)).text
            return sample(body, AGE, region=settings.region)

        async def reconcile_said() -> str:
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text  # reported, never a readiness failure
            said: str = ready.json()["reconcile"]
            return said

        assert math.isinf(await age())  # no run ever: an alert fires on +Inf as on any age
        assert (await reconcile_said()).startswith("never succeeded")

        await sql(
            engine,
            "INSERT INTO reconcile_runs (id, region, trigger, status, started_at, finished_at)"
            " VALUES ('run_01JDQ8Z6V4Q0K9X7M3T5R2N8C1', :r, 'cron', 'succeeded',"
            " now() - interval '2 hours', now() - interval '2 hours')",
            r=settings.region,
        )
        stale = await age()
        assert stale >= 7200
        assert (await reconcile_said()).startswith("stale: last succeeded")

        run = await reconcile_now(client, uncached, engine)
        assert run["status"] == "succeeded"
        assert await age() < stale
        assert (await reconcile_said()).startswith("last succeeded")
