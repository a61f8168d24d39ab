"""A crawl's revisits: how many are due, how late they come, how many 304s, how many changes; pause/resume/drop."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

Connection = psycopg.Connection[tuple[Any, ...]]
WINDOW = 3600  # seconds; the 304 share, lateness and changes per hour are over the last hour

SUMMARY = """
SELECT
  (SELECT count(*) FROM {revisits} WHERE appid = %(a)s AND crawlid = %(c)s) AS tracked,
  (SELECT count(*) FROM {revisits} WHERE appid = %(a)s AND crawlid = %(c)s AND next_due <= now()) AS due_now,
  (SELECT EXISTS (SELECT 1 FROM {paused} WHERE appid = %(a)s AND crawlid = %(c)s)) AS paused,
  l.fetches, l.not_modified, l.p50, l.p99,
  (SELECT count(*) FROM {changes} WHERE appid = %(a)s AND crawlid = %(c)s AND kind = 'page'
     AND changed_at > now() - make_interval(secs => %(w)s)) AS changes
FROM (SELECT count(*) AS fetches, count(*) FILTER (WHERE outcome = 'not_modified') AS not_modified,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_s) AS p50,
             percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_s) AS p99
      FROM {log} WHERE appid = %(a)s AND crawlid = %(c)s AND fetched_at > now() - make_interval(secs => %(w)s)) l
"""


def _names(schema: str) -> dict[str, sql.Identifier]:
    return {name: sql.Identifier(schema, table) for name, table in (
        ("revisits", "revisits"), ("paused", "revisit_paused"), ("changes", "changes"), ("log", "revisit_log"))}


def summary(connection: Connection, schema: str, appid: str, crawlid: str) -> dict[str, Any]:
    """Revisits tracked and due now, paused, and over the last hour: fetches, 304 share, lateness p50/p99
    (seconds after the due time), changes found (per hour)."""
    query = sql.SQL(SUMMARY).format(**_names(schema))
    row = connection.execute(query, {"a": appid, "c": crawlid, "w": WINDOW}).fetchone()
    assert row is not None  # an aggregate always answers one row
    tracked, due, paused, fetches, not_modified, p50, p99, changes = row
    return {
        "appid": appid, "crawlid": crawlid, "tracked": int(tracked), "due_now": int(due), "paused": bool(paused),
        "revisits_last_hour": int(fetches), "not_modified_share": round(not_modified / fetches, 4) if fetches else None,
        "lateness_p50_s": _round(p50), "lateness_p99_s": _round(p99), "changes_per_hour": int(changes),
    }  # fmt: skip


def crawls(connection: Connection, schema: str) -> list[tuple[str, str]]:
    """(appid, crawlid) of every crawl with revisit state."""
    query = sql.SQL("SELECT DISTINCT appid, crawlid FROM {revisits} ORDER BY 1, 2").format(**_names(schema))
    return [(str(a), str(c)) for a, c in connection.execute(query).fetchall()]


def pause(connection: Connection, schema: str, appid: str, crawlid: str) -> None:
    """No revisit of the crawl is claimed until `resume` (the due ones wait, none is lost)."""
    connection.execute(sql.SQL("INSERT INTO {paused} (appid, crawlid) VALUES (%s, %s) ON CONFLICT DO NOTHING")
                       .format(**_names(schema)), (appid, crawlid))  # fmt: skip


def resume(connection: Connection, schema: str, appid: str, crawlid: str) -> None:
    connection.execute(sql.SQL("DELETE FROM {paused} WHERE appid = %s AND crawlid = %s").format(**_names(schema)),
                       (appid, crawlid))  # fmt: skip


def drop(connection: Connection, schema: str, appid: str, crawlid: str) -> int:
    """Forget the crawl's revisit state (its pages stay); returns the rows dropped. A page the crawl
    fetches again with `revisit` starts a new row."""
    names = _names(schema)
    with connection.transaction():
        done = connection.execute(sql.SQL("DELETE FROM {revisits} WHERE appid = %s AND crawlid = %s").format(**names),
                                  (appid, crawlid))  # fmt: skip
        connection.execute(sql.SQL("DELETE FROM {paused} WHERE appid = %s AND crawlid = %s").format(**names),
                           (appid, crawlid))  # fmt: skip
    return max(done.rowcount, 0)


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
