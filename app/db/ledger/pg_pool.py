"""The PostgreSQL ledger's own asyncpg pool: how it connects and what each session keeps."""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine


def connect_kwargs(engine: AsyncEngine) -> dict[str, Any]:
    """asyncpg.connect() arguments for the database an engine points at."""
    _, params = engine.dialect.create_connect_args(engine.url)
    params = dict(params)
    cache_size = params.pop("prepared_statement_cache_size", None)
    if cache_size is not None:
        params["statement_cache_size"] = cache_size
    params.pop("prepared_statement_name_func", None)
    params.pop("async_creator_fn", None)
    return params


def raw_pool(engine: AsyncEngine, *, size: int) -> asyncpg.Pool:
    """asyncpg's pool to the engine's database, not yet initialized (no I/O here).

    Connections open on demand, at most ``size``. asyncpg drops a connection that failed
    or was closed by the server (``pg_terminate_backend``, a restart) instead of handing it
    out again. Its default reset on release (one more round trip each time) is skipped: a
    connection is borrowed for one autocommit statement and carries no session state. Nor
    does an idle connection expire (``max_inactive_connection_lifetime=0``): the expiry arms
    a timer on every release and cancels it on every acquire, for connections the
    engine's pool keeps open all the same. Statements are planned once (``_SESSION_SETTINGS``).
    """
    params = connect_kwargs(engine)
    params["server_settings"] = {**params.get("server_settings", {}), **_SESSION_SETTINGS}
    return asyncpg.create_pool(
        **params, min_size=0, max_size=size, reset=_keep_session,
        max_inactive_connection_lifetime=0,
        max_cached_statement_lifetime=STATEMENT_LIFETIME_SECONDS,
    )  # fmt: skip


# The group statements take arrays (``unnest``): left to choose, PostgreSQL plans them
# again on every execution (a custom plan for each array), which cost ~600 µs of server CPU
# per statement, four times the statement itself. Their generic plan (index lookups per
# item) is the right one for any batch size, made once per connection. Every other
# statement on these connections is a single-row lookup by key.
#
# But a plan is made for the tables as they are then, and one made while the ledger was
# nearly empty reads the whole table (cheapest for a few rows) and keeps doing so as it
# grows: 12 ms per group finalize in the first half minute of a 50,000-reminder run,
# 300 ms a few minutes into a million-reminder one. So these sessions plan without
# sequential scans wherever an index serves (``enable_seqscan`` only prices them out),
# the plan every statement here wants at any table size.
_SESSION_SETTINGS = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}

# Each connection still prepares, and plans, its statements again every half minute (a few
# milliseconds each time), so a plan follows the statistics autovacuum refreshes.
STATEMENT_LIFETIME_SECONDS = 30


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """Nothing to reset: see ``raw_pool``."""
