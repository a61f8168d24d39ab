"""The sink's message parsing: rows from good messages, a dead-letter reason for every bad one (no sockets)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import ujson
from kafka.consumer.fetcher import ConsumerRecord

from sink.messages import ITEM_COLUMNS, LOG_COLUMNS, PAGE_COLUMNS, Parser, content_hash
from sink.store import unavailable
from utils.config.redact import redact_dsn

PARSER = Parser(items_topic="p.items")


def record(value: Any, topic: str = "p.crawled_firehose", offset: int = 7) -> ConsumerRecord:
    raw = value if isinstance(value, bytes) else ujson.dumps(value).encode()
    return ConsumerRecord(topic, 1, None, offset, 0, 0, None, raw, None, None, len(raw), -1, None)


def page(**extra: Any) -> dict[str, Any]:
    return {"url": "http://a/1", "appid": "app", "crawlid": "c", "spiderid": "link", "status_code": 200,
            "timestamp": "2026-11-25T06:00:00.5", "body": "<p>x</p>", "response_headers": {"A": ["1"]},
            "links": [], "request_id": "r1", "attempt": 2, "worker": "h:1", **extra}  # fmt: skip


def test_a_page_gives_a_page_row_and_a_log_row() -> None:
    rows = PARSER.parse([record(page())])
    assert rows.dead_letters == []
    (row,) = rows.pages
    (line,) = rows.log
    assert len(row) == len(PAGE_COLUMNS)
    assert len(line) == len(LOG_COLUMNS)
    fields = dict(zip(PAGE_COLUMNS, row, strict=True))
    assert fields["fetched_at"] == datetime(2026, 11, 25, 6, 0, 0, 500000, tzinfo=UTC)
    assert fields["content_hash"] == content_hash("<p>x</p>")
    assert fields["headers"] == '{"A":["1"]}'
    log = dict(zip(LOG_COLUMNS, line, strict=True))
    assert (log["attempt"], log["worker"], log["kafka_offset"], log["success"]) == (2, "h:1", 7, True)


def test_a_failed_fetch_is_logged_but_leaves_the_page_alone() -> None:
    rows = PARSER.parse([record(page(success=False, body=None, exception="DNSLookupError: x"))])
    assert rows.pages == []
    assert dict(zip(LOG_COLUMNS, rows.log[0], strict=True))["error"] == "DNSLookupError: x"


def test_bodies_are_left_out_when_not_stored_but_still_hashed() -> None:
    rows = Parser(items_topic="p.items", store_body=False).parse([record(page())])
    fields = dict(zip(PAGE_COLUMNS, rows.pages[0], strict=True))
    assert fields["body"] is None
    assert fields["content_hash"] == content_hash("<p>x</p>")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{not json", "not valid JSON"),
        ([1], "not a JSON object but list"),
        (page(url=""), "'url' must be a non-empty string"),
        (page(crawlid=None), "'crawlid' must be a non-empty string"),
        (page(timestamp="soon"), "'timestamp' is not an ISO-8601 time"),
        (page(status_code=True), "'status_code' must be a 32-bit integer"),
        (page(attempt=2**40), "'attempt' must be a 32-bit integer"),
        (page(body=["x"]), "'body' must be a string"),
        (page(success="yes"), "'success' must be true or false"),
    ],
)
def test_a_bad_page_is_dead_lettered_with_its_reason(value: Any, reason: str) -> None:
    rows = PARSER.parse([record(value), record(page(url="http://a/ok"), offset=8)])
    (letter,) = rows.dead_letters
    assert reason in letter["error"]
    assert letter["kafka"] == {"topic": "p.crawled_firehose", "partition": 1, "offset": 7}
    assert [row[1] for row in rows.pages] == ["http://a/ok"]  # the batch goes on


def test_nul_characters_never_reach_postgresql() -> None:
    rows = PARSER.parse([record(page(body="a\x00b", response_headers={"X": ["\x00"]}))])
    fields = dict(zip(PAGE_COLUMNS, rows.pages[0], strict=True))
    assert fields["body"] == "a\ufffdb"
    assert "\\u0000" not in fields["headers"]


def item(**extra: Any) -> dict[str, Any]:
    return {"appid": "app", "crawlid": "c", "spiderid": "shop", "url": "http://a/p/7", "request_id": "r",
            "timestamp": "2026-11-25T06:00:00", "item_type": "Product", "item": {"sku": "S7", "price": 2}, **extra}


def test_items_are_keyed_by_the_named_field_else_the_url() -> None:
    rows = PARSER.parse([record(item(), "p.items"), record(item(item_key="sku"), "p.items")])
    keys = [dict(zip(ITEM_COLUMNS, row, strict=True))["item_key"] for row in rows.items]
    assert keys == ["http://a/p/7", "S7"]
    assert rows.log == []


def test_an_item_sent_flat_keeps_its_own_fields() -> None:
    flat = {"appid": "app", "crawlid": "c", "url": "http://a/p/7", "timestamp": "2026-11-25T06:00:00", "sku": "S7"}
    (row,) = PARSER.parse([record(flat, "p.items")]).items
    assert dict(zip(ITEM_COLUMNS, row, strict=True))["item"] == '{"sku":"S7"}'


def test_an_item_without_its_key_is_dead_lettered() -> None:
    rows = PARSER.parse([record(item(item_key="ean"), "p.items")])
    assert rows.items == []
    assert "no usable key field 'ean'" in rows.dead_letters[0]["error"]


def test_equal_items_hash_equal_whatever_the_key_order() -> None:
    one = PARSER.parse([record(item(item={"a": 1, "b": 2}), "p.items")]).items[0]
    two = PARSER.parse([record(item(item={"b": 2, "a": 1}), "p.items")]).items[0]
    assert one[ITEM_COLUMNS.index("content_hash")] == two[ITEM_COLUMNS.index("content_hash")]


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db?password=secret&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
        ("host=h user=u password='se cret' dbname=d", "host=h user=u password=*** dbname=d"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_a_dsn_is_logged_without_its_password(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown


@pytest.mark.parametrize("escape", [b"\\udc00", b"a\\ud800", b"\\udfffx"])
def test_lone_surrogates_become_question_marks_in_text_and_json(escape: bytes) -> None:
    start = b'{"url": "http://a/1", "appid": "app", "crawlid": "c", "timestamp": "2026-11-25T06:00:00", '
    rows = PARSER.parse([record(start + b'"body": "' + escape + b'", "links": [{"text": "' + escape + b'"}]}')])
    assert rows.dead_letters == []
    fields = dict(zip(PAGE_COLUMNS, rows.pages[0], strict=True))
    fields["body"].encode("utf-8")
    fields["links"].encode("utf-8")
    assert "?" in fields["body"]
    assert "\\ud" not in fields["links"]


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (psycopg.OperationalError("connection refused"), True),  # no SQLSTATE: the client lost the server
        (psycopg.InterfaceError("connection already closed"), True),
        (psycopg.errors.lookup("57P01")("terminating connection due to administrator command"), True),
        (psycopg.errors.lookup("53100")("could not extend file: no space left"), True),
        (psycopg.errors.lookup("54000")("index row size exceeds maximum"), False),  # the data: dead-letter it
        (psycopg.errors.lookup("22021")("invalid byte sequence"), False),
    ],
)
def test_only_server_failures_hold_the_batch(error: psycopg.Error, retry: bool) -> None:
    assert unavailable(error) is retry
