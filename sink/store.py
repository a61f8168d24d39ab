"""One batch, one transaction: COPY the rows into temporary staging tables, then one upsert per table.

The upserts keep the newest fetch of each row: a message older than (or as old as) the stored one
changes nothing, so a replayed batch is harmless. A newer one always moves `fetched_at`/`last_seen`
on, but the content columns and `last_changed` only when the content hash differs. The crawl log is
keyed by the message's Kafka coordinates, so a replay adds no line twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from sink import revisits
from sink.messages import EXTRACTED_COLUMNS, ITEM_COLUMNS, LOG_COLUMNS, PAGE_COLUMNS, Rows
from sink.schema import Tables, migrate
from utils.config.postgres import close_quietly, operation_deadline

log = logging.getLogger(__name__)

Connection = psycopg.Connection[tuple[Any, ...]]

STAGES = {
    "sink_stage_pages": "appid text, url text, crawlid text, spiderid text, status_code integer, content_hash bytea, "
                        "headers jsonb, links jsonb, body text, fetched_at timestamptz, text text, markdown text, "
                        "metadata jsonb, simhash text, near_duplicate boolean, duplicate_of text, cluster_id text",
    "sink_stage_items": "appid text, item_key text, crawlid text, spiderid text, url text, item_type text, item jsonb, "
                        "content_hash bytea, seen_at timestamptz",
    "sink_stage_log": "request_id text, attempt integer, url text, appid text, crawlid text, spiderid text, "
                      "worker text, status_code integer, success boolean, error text, fetched_at timestamptz, "
                      "kafka_topic text, kafka_partition integer, kafka_offset bigint",
    revisits.STAGE: revisits.STAGE_COLUMNS,
}  # fmt: skip
PAGE_CONTENT = ("status_code", "headers", "links", "body", "content_hash")
ITEM_CONTENT = ("item_type", "item", "content_hash")


def _if_changed(columns: Iterable[str], stamp: str) -> sql.Composable:
    """`col = CASE WHEN hash differs THEN new ELSE old END, ..., last_changed = ...` (old values on the right)."""
    changed = "t.content_hash IS DISTINCT FROM EXCLUDED.content_hash"
    parts: list[sql.Composable] = [
        sql.SQL(f"{{col}} = CASE WHEN {changed} THEN EXCLUDED.{{col}} ELSE t.{{col}} END").format(col=sql.Identifier(c))
        for c in columns
    ]
    parts.append(sql.SQL(f"last_changed = CASE WHEN {changed} THEN EXCLUDED.{stamp} ELSE t.last_changed END"))
    return sql.SQL(", ").join(parts)


def upsert_pages(tables: Tables) -> sql.Composed:
    """The extraction columns follow the newest fetch that has them (a crawl may turn `extract` on for
    pages whose body did not change), the near-duplicate verdict the newest fetch."""
    extracted = sql.SQL(", ").join(map(sql.Identifier, EXTRACTED_COLUMNS))
    kept = sql.SQL(", ").join(
        sql.SQL("{c} = COALESCE(EXCLUDED.{c}, t.{c})" if c in ("text", "markdown", "metadata", "simhash")
                else "{c} = EXCLUDED.{c}").format(c=sql.Identifier(c))
        for c in EXTRACTED_COLUMNS
    )  # fmt: skip
    return sql.SQL("""
INSERT INTO {pages} AS t (appid, url, crawlid, spiderid, status_code, content_hash, headers, links, body,
                          first_seen, fetched_at, last_changed, {extracted})
SELECT DISTINCT ON (appid, url) appid, url, crawlid, spiderid, status_code, content_hash, headers, links, body,
       fetched_at, fetched_at, fetched_at, {extracted}
FROM sink_stage_pages ORDER BY appid, url, fetched_at DESC
ON CONFLICT (appid, url) DO UPDATE SET crawlid = EXCLUDED.crawlid, spiderid = EXCLUDED.spiderid,
    fetched_at = EXCLUDED.fetched_at, {kept}, {content}
WHERE EXCLUDED.fetched_at > t.fetched_at
""").format(pages=sql.Identifier(tables.schema, tables.pages), content=_if_changed(PAGE_CONTENT, "fetched_at"),
            extracted=extracted, kept=kept)  # fmt: skip


def upsert_items(tables: Tables) -> sql.Composed:
    return sql.SQL("""
INSERT INTO {items} AS t (appid, item_key, crawlid, spiderid, url, item_type, item, content_hash,
                          first_seen, last_seen, last_changed)
SELECT DISTINCT ON (appid, item_key) appid, item_key, crawlid, spiderid, url, item_type, item, content_hash,
       seen_at, seen_at, seen_at
FROM sink_stage_items ORDER BY appid, item_key, seen_at DESC
ON CONFLICT (appid, item_key) DO UPDATE SET crawlid = EXCLUDED.crawlid, spiderid = EXCLUDED.spiderid,
    url = EXCLUDED.url, last_seen = EXCLUDED.last_seen, {content}
WHERE EXCLUDED.last_seen > t.last_seen
""").format(items=sql.Identifier(tables.schema, tables.items), content=_if_changed(ITEM_CONTENT, "last_seen"))


def append_log(tables: Tables) -> sql.Composed:
    columns = sql.SQL(", ").join(map(sql.Identifier, LOG_COLUMNS))
    return sql.SQL(
        "INSERT INTO {log} ({columns}) SELECT {columns} FROM sink_stage_log "
        "ON CONFLICT (kafka_topic, kafka_partition, kafka_offset) DO NOTHING"
    ).format(log=sql.Identifier(tables.schema, tables.crawl_log), columns=columns)


UNAVAILABLE_CLASSES = ("08", "53", "57", "58")  # SQLSTATE classes: connection, resources, operator intervention, system


def unavailable(exc: BaseException) -> bool:
    """Whether PostgreSQL failed (down, restarting, out of resources: retry the batch) rather than
    refused the data (e.g. 54000, a key too long for its index: dead-letter the message)."""
    if isinstance(exc, psycopg.InterfaceError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    sqlstate = exc.sqlstate
    return sqlstate is None or sqlstate[:2] in UNAVAILABLE_CLASSES


@dataclass
class Written:
    """Rows a batch inserted or updated (a replay or an older message counts 0)."""

    pages: int = 0
    items: int = 0
    log: int = 0
    revisits: int = 0


class Store:
    """The sink's connection: opened (and the schema migrated) on first use, dropped after any error."""

    def __init__(self, conninfo: str, tables: Tables, operation_timeout: float = 0.0) -> None:
        self.conninfo = conninfo
        self.tables = tables
        self.operation_timeout = operation_timeout  # seconds a migration or a batch may take (0: no bound)
        self.connection: Connection | None = None
        self._statements = (upsert_pages(tables), upsert_items(tables), append_log(tables))
        self._item_changes = revisits.record_item_changes(tables)
        self._revisits = revisits.statements(tables)

    def connect(self) -> Connection:
        if self.connection is None or self.connection.closed:
            connection = psycopg.connect(self.conninfo, autocommit=True)
            try:
                with operation_deadline(connection, self.operation_timeout):
                    connection.execute("SET TIME ZONE 'UTC'")
                    migrate(connection, self.tables)
                    for name, columns in STAGES.items():
                        connection.execute(
                            f"CREATE TEMP TABLE IF NOT EXISTS {name} ({columns}) ON COMMIT DELETE ROWS"
                        )
            except BaseException:
                connection.close()
                raise
            self.connection = connection
        return self.connection

    def write(self, rows: Rows) -> Written:
        """Write the batch in one transaction; raises psycopg errors (then nothing of it is written)."""
        connection = self.connect()
        written = Written()
        try:
            with operation_deadline(connection, self.operation_timeout), connection.transaction(), \
                    connection.cursor() as cursor:
                pages, items, append = self._statements
                if rows.pages:
                    written.pages = _stage_and_run(cursor, "sink_stage_pages", PAGE_COLUMNS, rows.pages, pages)
                if rows.items:
                    written.items = _stage_and_run(cursor, "sink_stage_items", ITEM_COLUMNS, rows.items, items,
                                                   before=(self._item_changes,))  # fmt: skip
                if rows.revisits:  # after the pages: a 304 moves the stored page's fetched_at on
                    written.revisits = _stage_and_run(cursor, revisits.STAGE, revisits.REVISIT_COLUMNS,
                                                      rows.revisits, self._revisits[-1], before=self._revisits[:-1])
                if rows.log:
                    written.log = _stage_and_run(cursor, "sink_stage_log", LOG_COLUMNS, rows.log, append)
        except psycopg.Error as exc:
            if unavailable(exc) or connection.broken:
                self.close()  # a broken connection is not reused; the next write connects again
            raise
        return written

    def close(self) -> None:
        close_quietly(self.connection)
        self.connection = None


def _stage_and_run(
    cursor: psycopg.Cursor[tuple[Any, ...]], stage: str, columns: Sequence[str], rows: list[tuple[Any, ...]],
    statement: sql.Composed, before: Sequence[sql.Composed] = (),
) -> int:
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    with cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(stage), names)) as copy:
        for row in rows:
            copy.write_row(row)
    for first in before:
        cursor.execute(first)
    cursor.execute(statement)
    return max(cursor.rowcount, 0)
