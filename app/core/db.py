"""Engine and session factories, and the declarative Base every table shares."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy import Connection, MetaData, any_, event, func
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import ScalarSelect
from sqlalchemy.util import greenlet_spawn

# Constraint names are stable so that Alembic migrations can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# What a lost or restarting database raises when met through the driver directly (see
# single_statements); through SQLAlchemy the same arrives wrapped in DBAPIError.
DRIVER_OUTAGES: tuple[type[Exception], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up
)


_BROKEN: tuple[type[Exception], ...] = (*DRIVER_OUTAGES, OSError)

# Every error a database call can raise, through SQLAlchemy (DBAPIError wraps all of the
# driver's) or straight from the driver (single_statements). The API answers the outages among
# them with 503; the worker retries recording a sent attempt on any of them.
DATABASE_TROUBLE: tuple[type[Exception], ...] = (
    DBAPIError,
    PoolTimeoutError,
    OSError,
    asyncpg.PostgresError,
    *DRIVER_OUTAGES,
)


# A deadlock (40P01) or a serialization failure (40001) rolls back one of the transactions
# involved. Nothing is wrong with the request that lost: run again, it succeeds.
_TRANSACTION_CONFLICTS = frozenset({"40P01", "40001"})


def is_transaction_conflict(exc: BaseException) -> bool:
    """Whether PostgreSQL rolled this transaction back to break a deadlock or keep
    transactions serializable: met through SQLAlchemy (the driver's error is ``orig``) or
    through the driver directly (single_statements)."""
    driver_error = exc.orig if isinstance(exc, DBAPIError) else exc
    return getattr(driver_error, "sqlstate", None) in _TRANSACTION_CONFLICTS


# SQLSTATE classes of errors that pass by themselves: connection exception, insufficient
# resources (too many connections), operator intervention (shutting down, starting up,
# statement cancelled). Transaction conflicts pass too (is_transaction_conflict).
_TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57")


def is_transient(exc: BaseException) -> bool:
    """A database error worth trying again after a pause: the server is unreachable, restarting,
    overloaded or rolled the transaction back. Not a bad statement or a bug, which would only
    fail again."""
    if is_transaction_conflict(exc):
        return True
    if isinstance(exc, DBAPIError):
        # SQLAlchemy's wrapper around the driver's error, itself an adapter around asyncpg's.
        causes = (exc.orig, exc.orig.__cause__ if exc.orig is not None else None)
        return exc.connection_invalidated or any(c is not None and is_transient(c) for c in causes)
    if isinstance(exc, (PoolTimeoutError, OSError, *DRIVER_OUTAGES)):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES


def any_of(page: ScalarSelect[Any]) -> ColumnElement[Any]:
    """``Table.id == any_of(page)`` instead of ``Table.id.in_(page)`` when a page of ids picks
    the rows to update: PostgreSQL may plan ``IN (subquery)`` as a hash join over a scan of the
    whole table (a reconcile of 40,000 rows spent its time re-reading them, page after page);
    ``= ANY(array(subquery))`` looks each row up by its primary key."""
    return any_(func.array(page))


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def create_engine(
    database_url: str,
    *,
    pool_size: int = 20,
    connect_timeout: float = 60.0,
    command_timeout: float = 30.0,
) -> AsyncEngine:
    return create_async_engine(
        database_url,
        pool_size=pool_size,
        # No overflow: an overflow connection is opened for one checkout and closed after it,
        # so under load (100 attempts in flight, 20 connections) every statement beyond the
        # pool paid for a new PostgreSQL backend. Callers wait for a pooled one instead; the
        # hot paths hold it for one statement.
        max_overflow=0,
        pool_timeout=5,
        # A restarted PostgreSQL invalidates the pool on the first disconnect error; the request
        # that saw it answers 503 and the next one reconnects. No pre-ping round trip per checkout.
        pool_recycle=1800,
        # Statement parameters hold payloads and signing secrets: keep them out of errors/logs.
        hide_parameters=True,
        connect_args={
            "timeout": connect_timeout,
            "command_timeout": command_timeout,
            "server_settings": {
                "application_name": "herald",
                # The hot paths' statements (single_statements) are planned once per
                # connection: their best plan is the same whatever the values, and planned
                # afresh the accept spent more of PostgreSQL's time planning than writing, the
                # claim planned every day's partition (docs/benchmarks.md). Sessions plan each
                # statement for its values instead (PlannedForValues, below).
                "plan_cache_mode": "force_generic_plan",
                # No JIT. Every statement here is a short OLTP one, but over partitioned tables
                # the planner's cost estimates multiply by the number of days, pass the JIT
                # thresholds, and the claim spent 3.1 s compiling 416 functions to run for
                # 2 ms (docs/benchmarks.md).
                "jit": "off",
            },
        },
    )


class PlannedForValues(Session):
    """A session whose statements are planned for their values, each time they run.

    A listing's plan depends on whose rows it reads: under a generic plan a small tenant's
    page walked a big tenant's rows. A reconcile page's depends on its arrays: a generic plan
    picked a partial index full of dead entries, 400 ms a page instead of 10. Every session
    statement therefore runs as it always has, and only the named hot paths, which never use a
    session, run the plan their connection made once."""


@event.listens_for(PlannedForValues, "after_begin")
def _plan_for_values(session: Session, transaction: Any, connection: Connection) -> None:
    # SET LOCAL: it ends with the transaction, and the pooled connection goes back as it came.
    connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(
        engine, sync_session_class=PlannedForValues, expire_on_commit=False, autoflush=False
    )


@asynccontextmanager
async def single_statements(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection's asyncpg driver, for the hot paths that are one SQL statement each.

    Each statement is its own transaction: no BEGIN and COMMIT round trips, and asyncpg's
    prepared-statement cache instead of building and compiling a SQLAlchemy statement per call.
    Only for work that is atomic as one statement; anything needing two uses a session.
    """
    # Straight from the pool, without a Session or a Connection around it: those cost 2-3
    # times the checkout itself (120 us of 290 per statement, docs/benchmarks.md). No BEGIN
    # is sent: the asyncpg adapter begins a transaction only for a statement *it* executes.
    engine = sessionmaker.kw["bind"]
    assert isinstance(engine, AsyncEngine)
    pooled = await engine.raw_connection()
    try:
        driver: asyncpg.Connection = pooled.driver_connection
        yield driver
    except _BROKEN as exc:
        # A broken connection must not go back to the pool for the next caller to trip on.
        # (The rest of the pool finds out one connection at a time: each such caller gets
        # this error once -- a 503 to retry, or a job the reconciler brings back.)
        await greenlet_spawn(pooled.invalidate, exc)
        raise
    finally:
        # The pool's return runs the adapter's (no-op) rollback, which may await: as SQLAlchemy
        # runs its own asyncio calls, inside greenlet_spawn.
        await greenlet_spawn(pooled.close)
