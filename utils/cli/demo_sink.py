"""Where the demo's pages landed in PostgreSQL: the row count of the crawl and one query to look at them.

Shown by `shoal demo` when the node runs a sink (`shoal up --services ...,postgres`, as `make run`
does); without a reachable PostgreSQL it says how to get one.
"""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from utils.config.errors import ConfigError
from utils.config.postgres import postgres_address, postgres_connect, postgres_target
from utils.config.settings import Settings
from utils.services.postgres import postgres_ready

POLL = 0.5  # seconds between two counts while the sink catches up


def stored_pages(settings: Settings, crawlid: str) -> int:
    """Rows of the pages table for the crawl (0 before the sink created the table)."""
    table = sql.Identifier(settings.get_str("SINK_DB_SCHEMA"), settings.get_str("SINK_PAGES_TABLE"))
    with postgres_connect(settings, autocommit=True) as connection:
        try:
            row = connection.execute(sql.SQL("SELECT count(*) FROM {} WHERE crawlid = %s").format(table),
                                     (crawlid,)).fetchone()  # fmt: skip
        except psycopg.errors.UndefinedTable:
            return 0
    return int(row[0]) if row else 0


def show_stored_pages(settings: Settings, crawlid: str, expected: int, timeout: float = 30.0) -> int | None:
    """Wait (up to `timeout` s) for the sink to store the crawl's pages, then print where they are.

    Returns how many are stored, or None when no PostgreSQL answers (the node runs without one).
    """
    host, port = postgres_address(settings, "127.0.0.1", 5432)
    if not postgres_ready(host, port):
        print(f"\nno PostgreSQL at {host}:{port}: `shoal up --services kafka,redis,zookeeper,postgres` "
              "runs one with a sink that stores every page")  # fmt: skip
        return None
    deadline = time.monotonic() + timeout
    try:
        count = stored_pages(settings, crawlid)
        while count < expected and time.monotonic() < deadline:
            time.sleep(POLL)
            count = stored_pages(settings, crawlid)
    except (psycopg.Error, ConfigError) as exc:
        print(f"\nPostgreSQL at {host}:{port} did not answer the count: {str(exc).strip()}")
        return 0
    table = f"{settings.get_str('SINK_DB_SCHEMA')}.{settings.get_str('SINK_PAGES_TABLE')}"
    print(f"\nPostgreSQL: {count} pages of crawl {crawlid} in {table} ({postgres_target(settings)})")
    query = (f"SELECT url, status_code, fetched_at, length(body) FROM {table} "
             f"WHERE crawlid = '{crawlid}' ORDER BY url LIMIT 10")  # fmt: skip
    print(f'look at them: psql "{postgres_target(settings)}" -c "{query}"')
    return count
