"""Due revisits, claimed in PostgreSQL: `FOR UPDATE SKIP LOCKED`, so two processes never take one row.

A claim moves the row's `next_due` on by REVISIT_LEASE and commits before anything is sent: a
process killed after the commit loses nothing (the row comes due again after the lease), and no
other process can take the row meanwhile (nothing doubled). The sink clears the claim when the
page comes back, but not for a page fetched for an earlier claim (sink/revisits.py); `release` gives
back rows whose requests could not be sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

Connection = psycopg.Connection[tuple[Any, ...]]

CLAIM = """
WITH due AS (
    SELECT r.appid, r.url FROM {revisits} r
    WHERE r.next_due <= coalesce(%(now)s, now())
      AND NOT EXISTS (SELECT 1 FROM {paused} p WHERE p.appid = r.appid AND p.crawlid = r.crawlid)
    ORDER BY r.next_due LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE {revisits} r SET fed_at = coalesce(%(now)s, now()), fed_due = coalesce(r.fed_due, r.next_due),
                        next_due = coalesce(%(now)s, now()) + make_interval(secs => %(lease)s)
FROM due WHERE r.appid = due.appid AND r.url = due.url
RETURNING r.appid, r.url, r.crawlid, r.spiderid, r.request, r.policy, r.etag, r.last_modified, r.fed_due
"""

RELEASE = """
UPDATE {revisits} SET next_due = fed_due, fed_at = NULL
WHERE appid = %s AND url = %s AND fed_at IS NOT NULL
"""


@dataclass(frozen=True)
class Due:
    """A claimed revisit: what its request is built from."""

    appid: str
    url: str
    crawlid: str
    spiderid: str | None
    request: dict[str, Any]
    policy: dict[str, Any]
    etag: str | None
    last_modified: str | None
    due: datetime


def claim(connection: Connection, schema: str, limit: int, lease: float, now: datetime | None = None) -> list[Due]:
    """Claim up to `limit` due rows (oldest due first) in one committed transaction; `now` is the
    server's clock unless given (bench/freshness.py runs a compressed clock)."""
    query = sql.SQL(CLAIM).format(revisits=sql.Identifier(schema, "revisits"),
                                  paused=sql.Identifier(schema, "revisit_paused"))  # fmt: skip
    with connection.transaction():
        found = connection.execute(query, {"limit": limit, "lease": lease, "now": now}).fetchall()
    return [Due(*row) for row in found]


def release(connection: Connection, schema: str, rows: Sequence[Due]) -> None:
    """Make rows due again at once (their requests were not sent)."""
    query = sql.SQL(RELEASE).format(revisits=sql.Identifier(schema, "revisits"))
    with connection.transaction(), connection.cursor() as cursor:
        cursor.executemany(query, [(row.appid, row.url) for row in rows])
