"""Helpers of the sink's tests: page and item messages, an in-process sink, reading the tables back."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from sink.loop import Sink
from tests.support.cluster import TestCluster
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from utils.config.settings import Settings

T0 = datetime(2026, 11, 25, 6, 0, 0)


def stamp(seconds: float) -> str:
    """The crawler's timestamp form (UTC, no zone), `seconds` after T0."""
    return (T0 + timedelta(seconds=seconds)).isoformat()


def aware(seconds: float) -> datetime:
    return (T0 + timedelta(seconds=seconds)).replace(tzinfo=UTC)


def page(url: str, body: str, at: float, appid: str = "app", crawlid: str = "c1", **extra: Any) -> dict[str, Any]:
    """A page message as the crawler sends it (the fields the sink reads and a few more)."""
    return {
        "url": url, "response_url": url, "status_code": 200, "status_msg": "OK",
        "response_headers": {"Content-Type": ["text/html"], "Date": [stamp(at)]}, "request_headers": {},
        "body": body, "encoding": "utf-8", "links": [{"url": url + "/next", "text": "next"}],
        "appid": appid, "crawlid": crawlid, "spiderid": "link", "attrs": None,
        "request_id": f"r-{abs(hash(url)) % 10**8}", "attempt": 0, "curdepth": 0, "success": True,
        "timestamp": stamp(at), "worker": "host-a:4242", **extra,
    }  # fmt: skip


def item(url: str, fields: dict[str, Any], at: float, appid: str = "app", **extra: Any) -> dict[str, Any]:
    """An item message as docs/how-to/own-spider.md defines it."""
    return {"appid": appid, "crawlid": "c1", "spiderid": "shop", "url": url, "request_id": "r1",
            "timestamp": stamp(at), "item_type": "Product", "item": fields, **extra}  # fmt: skip


def sink_settings(cluster: TestCluster, postgres: Postgres, schema: str, **more: Any) -> None:
    """Point the test cluster (its processes and its settings) at `schema` of `postgres`."""
    values = {**postgres.settings(schema), "SINK_GROUP": f"{cluster.prefix}-sink", "SINK_TOPIC_REFRESH": "1",
              **{k: str(v) for k, v in more.items()}}  # fmt: skip
    cluster.env.update({f"SHOAL_{k}": v for k, v in values.items()})
    cluster.settings = Settings.load(environ=cluster.env)


class RunningSink:
    """A sink in a thread of the test process (its loop exactly as `shoal sink` runs it)."""

    def __init__(self, cluster: TestCluster) -> None:
        self.sink = Sink.from_settings(cluster.settings)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sink.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the sink did not stop within 30 s"


def count(postgres: Postgres, schema: str, table: str, where: str = "true") -> int:
    """Rows of the table (0 before the sink created it)."""
    with postgres.connect() as connection:
        query = sql.SQL("SELECT count(*) FROM {} WHERE " + where).format(sql.Identifier(schema, table))
        try:
            row = connection.execute(query).fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
    return int(row[0]) if row else 0


def rows(postgres: Postgres, schema: str, table: str, order: str) -> list[dict[str, Any]]:
    with postgres.connect() as connection:
        cursor = connection.execute(sql.SQL("SELECT * FROM {} ORDER BY " + order).format(sql.Identifier(schema, table)))
        names = [column.name for column in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def wait_count(postgres: Postgres, schema: str, table: str, expected: int, timeout: float = 60) -> None:
    wait_until(lambda: count(postgres, schema, table) >= expected, timeout,
               message=f"{table}: fewer than {expected} rows after {timeout} s")  # fmt: skip
    assert count(postgres, schema, table) == expected
