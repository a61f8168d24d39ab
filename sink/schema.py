"""The sink's tables, created and migrated by the sink itself: versioned, idempotent, safe to race.

Each migration runs once, in order, recorded in `<schema>.sink_migrations`; every sink that starts
takes the same advisory lock first, so two sinks starting together do not both migrate. Table names
come from the settings (SINK_DB_SCHEMA, SINK_*_TABLE); the migrations are written against them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from utils.config.settings import Settings

log = logging.getLogger(__name__)

LOCK_ID = 0x5A0A15  # pg_advisory_xact_lock key shared by every sink's migration step


@dataclass(frozen=True)
class Tables:
    """Qualified names of the sink's tables."""

    schema: str = "shoal"
    pages: str = "pages"
    items: str = "items"
    crawl_log: str = "crawl_log"

    @classmethod
    def from_settings(cls, settings: Settings) -> Tables:
        return cls(
            schema=settings.get_str("SINK_DB_SCHEMA"),
            pages=settings.get_str("SINK_PAGES_TABLE"),
            items=settings.get_str("SINK_ITEMS_TABLE"),
            crawl_log=settings.get_str("SINK_CRAWL_LOG_TABLE"),
        )

    def names(self) -> dict[str, sql.Composable]:
        """Placeholders of the SQL templates: `{pages}`, `{pages_crawl_idx}`, ... `{migrations}`."""
        found: dict[str, sql.Composable] = {"schema": sql.Identifier(self.schema)}
        for name in ("pages", "items", "crawl_log"):
            table = getattr(self, name)
            found[name] = sql.Identifier(self.schema, table)
            found[f"{name}_crawl_idx"] = sql.Identifier(f"{table}_crawl_idx")
            found[f"{name}_url_idx"] = sql.Identifier(f"{table}_url_idx")
        found["migrations"] = sql.Identifier(self.schema, "sink_migrations")
        for name in REVISIT_TABLES:  # issue 31: fixed names next to the pages table
            found[name] = sql.Identifier(self.schema, name)
            found[f"{name}_due_idx"] = sql.Identifier(f"{name}_due_idx")
            found[f"{name}_crawl_idx"] = sql.Identifier(f"{name}_crawl_idx")
        return found

    def qualified(self, name: str) -> sql.Identifier:
        """`<schema>.<name>`, for the revisit tables (revisits, changes, revisit_log, revisit_paused)."""
        return sql.Identifier(self.schema, name)


REVISIT_TABLES = ("revisits", "changes", "revisit_log", "revisit_paused")


MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "pages, items and the crawl log", """
CREATE TABLE IF NOT EXISTS {pages} (
    appid text NOT NULL,
    url text NOT NULL,
    crawlid text,
    spiderid text,
    status_code integer,
    content_hash bytea NOT NULL,
    headers jsonb NOT NULL,
    links jsonb NOT NULL,
    body text,
    first_seen timestamptz NOT NULL,
    fetched_at timestamptz NOT NULL,
    last_changed timestamptz NOT NULL,
    PRIMARY KEY (appid, url)
);
CREATE TABLE IF NOT EXISTS {items} (
    appid text NOT NULL,
    item_key text NOT NULL,
    crawlid text,
    spiderid text,
    url text,
    item_type text,
    item jsonb NOT NULL,
    content_hash bytea NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    last_changed timestamptz NOT NULL,
    PRIMARY KEY (appid, item_key)
);
CREATE TABLE IF NOT EXISTS {crawl_log} (
    id bigserial PRIMARY KEY,
    request_id text,
    attempt integer,
    url text NOT NULL,
    appid text,
    crawlid text,
    spiderid text,
    worker text,
    status_code integer,
    success boolean NOT NULL,
    error text,
    fetched_at timestamptz NOT NULL,
    logged_at timestamptz NOT NULL DEFAULT now(),
    kafka_topic text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    UNIQUE (kafka_topic, kafka_partition, kafka_offset)
);
"""),
    (2, "indexes by crawl and by url", """
CREATE INDEX IF NOT EXISTS {pages_crawl_idx} ON {pages} (appid, crawlid);
CREATE INDEX IF NOT EXISTS {items_crawl_idx} ON {items} (appid, crawlid);
CREATE INDEX IF NOT EXISTS {crawl_log_crawl_idx} ON {crawl_log} (appid, crawlid);
CREATE INDEX IF NOT EXISTS {crawl_log_url_idx} ON {crawl_log} (url);
"""),
    (3, "revisit state, changes and the revisit log (issue 31)", """
CREATE TABLE IF NOT EXISTS {revisits} (
    appid text NOT NULL,
    url text NOT NULL,
    crawlid text NOT NULL,
    spiderid text,
    request jsonb NOT NULL,
    policy jsonb NOT NULL,
    etag text,
    last_modified text,
    content_hash bytea,
    last_fetch timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    last_status integer,
    interval_s double precision NOT NULL,
    next_due timestamptz,
    unchanged_count integer NOT NULL DEFAULT 0,
    fed_at timestamptz,
    fed_due timestamptz,
    PRIMARY KEY (appid, url)
);
CREATE INDEX IF NOT EXISTS {revisits_due_idx} ON {revisits} (next_due) WHERE next_due IS NOT NULL;
CREATE INDEX IF NOT EXISTS {revisits_crawl_idx} ON {revisits} (appid, crawlid);
CREATE TABLE IF NOT EXISTS {changes} (
    id bigserial PRIMARY KEY,
    appid text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    crawlid text,
    changed_at timestamptz NOT NULL,
    old_hash bytea,
    new_hash bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS {changes_crawl_idx} ON {changes} (appid, crawlid, changed_at);
CREATE TABLE IF NOT EXISTS {revisit_log} (
    id bigserial PRIMARY KEY,
    appid text NOT NULL,
    crawlid text,
    url text NOT NULL,
    fetched_at timestamptz NOT NULL,
    outcome text NOT NULL,
    lateness_s double precision
);
CREATE INDEX IF NOT EXISTS {revisit_log_crawl_idx} ON {revisit_log} (appid, crawlid, fetched_at);
CREATE TABLE IF NOT EXISTS {revisit_paused} (
    appid text NOT NULL,
    crawlid text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (appid, crawlid)
);
"""),
    (4, "main text, Markdown, metadata and near-duplicates of pages", """
ALTER TABLE {pages} ADD COLUMN IF NOT EXISTS text text, ADD COLUMN IF NOT EXISTS markdown text,
    ADD COLUMN IF NOT EXISTS metadata jsonb, ADD COLUMN IF NOT EXISTS simhash text,
    ADD COLUMN IF NOT EXISTS near_duplicate boolean, ADD COLUMN IF NOT EXISTS duplicate_of text,
    ADD COLUMN IF NOT EXISTS cluster_id text;
"""),
]


def migrate(connection: psycopg.Connection[Any], tables: Tables) -> list[int]:
    """Apply the migrations not yet recorded, in one transaction; returns the versions applied."""
    names = tables.names()
    applied: list[int] = []
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {schema}").format(**names))
        connection.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {migrations} (version integer PRIMARY KEY, description text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(**names))  # fmt: skip
        done = {row[0] for row in connection.execute(sql.SQL("SELECT version FROM {migrations}").format(**names))}
        for version, description, template in MIGRATIONS:
            if version in done:
                continue
            connection.execute(sql.SQL(template).format(**names))  # type: ignore[arg-type]
            connection.execute(
                sql.SQL("INSERT INTO {migrations} (version, description) VALUES (%s, %s)").format(**names),
                (version, description),
            )
            applied.append(version)
    if applied:
        log.info("Sink schema migrated", extra={"schema": tables.schema, "versions": applied})
    return applied


def schema_version(connection: psycopg.Connection[Any], tables: Tables) -> int:
    """The highest migration recorded (0 before the first)."""
    query = sql.SQL("SELECT coalesce(max(version), 0) FROM {migrations}").format(**tables.names())
    row = connection.execute(query).fetchone()
    return int(row[0]) if row else 0
