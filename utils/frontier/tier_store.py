"""The disk tier's table in PostgreSQL: the tails of deep queues (utils/frontier/tier.py moves them).

One row per queued request past its domain's window: the shard-tagged spiderid, the domain, the
queue score and member verbatim (the member's bytes order ties: `COLLATE "C"`, as Redis orders a
ZSET), the crawl's code and the stored request. The table is partitioned by hash of the domain;
its primary key `(sid, domain, score, member)` is the queue's own order, so a domain's best rows
are one index range scan. Every method runs in the connection's open transaction; the caller commits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

DEFAULT_TABLE = "frontier_tail"
Row = tuple[str, str, float, str, str, str]  # sid, domain, score, member, crawl code, stored request


class TailStore:
    """SQL of the tail table `table` over one connection (autocommit off)."""

    def __init__(self, conn: psycopg.Connection[Any], table: str = DEFAULT_TABLE) -> None:
        self.conn = conn
        self.table = sql.Identifier(table)
        self.staging = sql.Identifier(f"{table}_in")

    def create(self, partitions: int) -> None:
        """The table, its partitions and its crawl index, if missing (committed)."""
        name = self.table.as_string(self.conn).strip('"')
        with self.conn.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (sid text NOT NULL, domain text NOT NULL, score float8 NOT NULL,"
                    ' member text COLLATE "C" NOT NULL, crawl text NOT NULL, payload text NOT NULL,'
                    " PRIMARY KEY (sid, domain, score, member)) PARTITION BY HASH (domain)"
                ).format(self.table)
            )
            for k in range(partitions):
                part = sql.Identifier(f"{name}_p{k}")
                cur.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {})"
                    ).format(part, self.table, sql.Literal(partitions), sql.Literal(k))
                )
            cur.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (sid, crawl)").format(
                    sql.Identifier(f"{name}_crawl"), self.table
                )
            )
        self.conn.commit()

    def lock(self, sid: str, wait: bool) -> bool:
        """The session's advisory lock of one shard's tail (held until `unlock` or the connection ends)."""
        query = "SELECT pg_advisory_lock(%s), true" if wait else "SELECT pg_try_advisory_lock(%s), true"
        with self.conn.cursor() as cur:
            row = cur.execute(query, (lock_key(sid),)).fetchone()
        self.conn.commit()
        return bool(wait or (row and row[0]))

    def unlock(self, sid: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", (lock_key(sid),))
        self.conn.commit()

    def insert(self, rows: Iterable[Row]) -> None:
        """COPY the rows in; a row already there (a copy the mover repeats) is left as it is."""
        with self.conn.cursor() as cur:
            cur.execute(
                sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {}) ON COMMIT DELETE ROWS").format(
                    self.staging, self.table
                )
            )
            with cur.copy(
                sql.SQL("COPY {} (sid, domain, score, member, crawl, payload) FROM STDIN").format(self.staging)
            ) as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(
                sql.SQL("INSERT INTO {} SELECT * FROM {} ON CONFLICT DO NOTHING").format(self.table, self.staging)
            )

    def best(self, sid: str, domain: str, limit: int) -> list[tuple[float, str, str]]:
        """(score, member, stored request) of the domain's `limit` first rows in queue order, locked."""
        query = sql.SQL(
            "SELECT score, member, payload FROM {} WHERE sid = %s AND domain = %s"
            " ORDER BY score, member LIMIT %s FOR UPDATE"
        ).format(self.table)
        with self.conn.cursor() as cur:
            return [(float(s), str(m), str(p)) for s, m, p in cur.execute(query, (sid, domain, limit))]

    def best_of(self, sid: str, wanted: dict[str, int]) -> dict[str, list[tuple[float, str, str]]]:
        """`best` of several domains in one query: domain -> its rows, for `wanted` domain -> count."""
        query = sql.SQL(
            "SELECT d.domain, r.score, r.member, r.payload FROM unnest(%s::text[], %s::int[]) AS d(domain, n)"
            " CROSS JOIN LATERAL (SELECT score, member, payload FROM {} t WHERE t.sid = %s AND t.domain = d.domain"
            " ORDER BY score, member LIMIT d.n) r"
        ).format(self.table)
        found: dict[str, list[tuple[float, str, str]]] = {d: [] for d in wanted}
        with self.conn.cursor() as cur:
            for d, s, m, p in cur.execute(query, (list(wanted), list(wanted.values()), sid)):
                found[str(d)].append((float(s), str(m), str(p)))
        return found

    def of_crawl(self, sid: str, crawl: str, limit: int) -> list[tuple[str, str]]:
        """(domain, member) of up to `limit` rows of one crawl (its code), locked."""
        query = sql.SQL("SELECT domain, member FROM {} WHERE sid = %s AND crawl = %s LIMIT %s FOR UPDATE").format(
            self.table
        )
        with self.conn.cursor() as cur:
            return [(str(d), str(m)) for d, m in cur.execute(query, (sid, crawl, limit))]

    def delete(self, sid: str, rows: Sequence[Sequence[str]]) -> int:
        """Delete rows named by (domain, member); the rows deleted."""
        by_domain: dict[str, list[str]] = {}
        for domain, member in rows:
            by_domain.setdefault(domain, []).append(member)
        query = sql.SQL("DELETE FROM {} WHERE sid = %s AND domain = %s AND member = ANY(%s)").format(self.table)
        deleted = 0
        with self.conn.cursor() as cur:
            for domain, members in by_domain.items():
                cur.execute(query, (sid, domain, members))
                deleted += cur.rowcount
        return deleted

    def crawl_domains(self, sid: str, crawl: str) -> list[tuple[str, int, float, float]]:
        """(domain, rows, best score, worst score) of one crawl's rows."""
        query = sql.SQL(
            "SELECT domain, count(*), min(score), max(score) FROM {} WHERE sid = %s AND crawl = %s GROUP BY domain"
        ).format(self.table)
        with self.conn.cursor() as cur:
            return [(str(d), int(n), float(lo), float(hi)) for d, n, lo, hi in cur.execute(query, (sid, crawl))]

    def count(self, sid: str | None = None) -> int:
        """Rows of one shard's spider (None: every row)."""
        where = sql.SQL(" WHERE sid = %s") if sid is not None else sql.SQL("")
        with self.conn.cursor() as cur:
            row = cur.execute(
                sql.SQL("SELECT count(*) FROM {}").format(self.table) + where, (sid,) if sid is not None else ()
            ).fetchone()
        return int(row[0]) if row else 0


def lock_key(sid: str) -> int:
    """A signed 64-bit advisory lock key for one shard's tail (stable across processes)."""
    return int.from_bytes(hashlib.sha1(f"shoal-tier:{sid}".encode()).digest()[:8], "big", signed=True)
