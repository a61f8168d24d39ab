"""The sink against a real PostgreSQL and the session broker: upserts, change detection, the crawl log,
items, dead letters, migrations and the password."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from redis_monitor.stats_report import StatsReport
from sink.schema import MIGRATIONS, Tables, migrate, schema_version
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader, produce
from tests.support.postgres import PASSWORD, Postgres
from tests.support.services import wait_until
from tests.support.sink import RunningSink, aware, count, item, page, rows, sink_settings, wait_count
from utils.config.clients import ensure_topics, redis_client
from utils.observability.stats import StatsConfig
from utils.services import LocalServices

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

URLS = [f"http://127.0.0.19:8190/p{i}.html" for i in range(40)]
CONTENT = ("status_code", "content_hash", "headers", "links", "body", "first_seen", "last_changed")


@pytest.fixture
def plain_cluster(services: LocalServices, tmp_path: Path) -> Iterator[TestCluster]:
    """This test's topics and group (the sink uses no Redis: not run once per Redis backend)."""
    test_cluster = TestCluster(services, tmp_path)
    yield test_cluster
    test_cluster.stop_all()


@pytest.fixture
def sink_cluster(plain_cluster: TestCluster, postgres: Postgres, pg_schema: str) -> TestCluster:
    sink_settings(plain_cluster, postgres, pg_schema)
    return plain_cluster


def _send(cluster: TestCluster, suffix: str, messages: list[object]) -> None:
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic(suffix), messages)


def _pages(postgres: Postgres, schema: str) -> dict[str, dict[str, object]]:
    return {row["url"]: row for row in rows(postgres, schema, "pages", "url")}


def test_pages_upsert_once_and_keep_unchanged_rows(
    sink_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    sink = RunningSink(sink_cluster)
    try:
        _send(sink_cluster, "crawled_firehose", [page(url, f"<p>{url}</p>", 0) for url in URLS])
        wait_count(postgres, pg_schema, "crawl_log", len(URLS))
        first = _pages(postgres, pg_schema)
        assert len(first) == len(URLS)
        row = first[URLS[3]]
        assert row["body"] == f"<p>{URLS[3]}</p>"
        assert row["status_code"] == 200
        assert row["first_seen"] == row["fetched_at"] == row["last_changed"] == aware(0)
        assert row["links"] == [{"url": URLS[3] + "/next", "text": "next"}]

        # A re-crawl: same bodies (new Date headers), one page changed.
        changed = URLS[5]
        again = [page(url, "<p>new</p>" if url == changed else f"<p>{url}</p>", 60, crawlid="c2") for url in URLS]
        _send(sink_cluster, "crawled_firehose", again)
        wait_count(postgres, pg_schema, "crawl_log", 2 * len(URLS))
        second = _pages(postgres, pg_schema)
        for url in URLS:
            before, after = first[url], second[url]
            assert after["fetched_at"] == aware(60)
            assert after["crawlid"] == "c2"
            if url == changed:
                assert after["body"] == "<p>new</p>"
                assert after["last_changed"] == aware(60)
                assert after["content_hash"] != before["content_hash"]
                assert after["first_seen"] == aware(0)
            else:
                assert {k: after[k] for k in CONTENT} == {k: before[k] for k in CONTENT}, url

        # An older fetch replayed after the newer one changes nothing, not even fetched_at.
        _send(sink_cluster, "crawled_firehose", [page(changed, "<p>stale</p>", 30, crawlid="old")])
        wait_count(postgres, pg_schema, "crawl_log", 2 * len(URLS) + 1)
        assert _pages(postgres, pg_schema)[changed] == second[changed]
    finally:
        sink.close()


def test_crawl_log_records_every_attempt_and_failures(
    sink_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    url = URLS[0]
    failed = page(url, None, 5, success=False, status_code=None, exception="TimeoutError: took too long",
                  attempt=1)  # fmt: skip
    _send(sink_cluster, "crawled_firehose", [page(url, "ok", 0), failed])
    sink = RunningSink(sink_cluster)
    try:
        wait_count(postgres, pg_schema, "crawl_log", 2)
    finally:
        sink.close()
    log = rows(postgres, pg_schema, "crawl_log", "fetched_at")
    assert [(r["url"], r["attempt"], r["success"], r["worker"]) for r in log] == [
        (url, 0, True, "host-a:4242"), (url, 1, False, "host-a:4242")]  # fmt: skip
    assert log[1]["error"] == "TimeoutError: took too long"
    assert log[1]["status_code"] is None
    # The failed attempt left the stored page as the successful one wrote it.
    assert [(r["body"], r["fetched_at"]) for r in rows(postgres, pg_schema, "pages", "url")] == [("ok", aware(0))]


def test_items_topic_is_read_once_it_exists(sink_cluster: TestCluster, postgres: Postgres, pg_schema: str) -> None:
    sink = RunningSink(sink_cluster)
    try:
        _send(sink_cluster, "crawled_firehose", [page(URLS[0], "x", 0)])
        wait_count(postgres, pg_schema, "pages", 1)
        ensure_topics(sink_cluster.settings, [sink_cluster.settings.topic("items")])
        products = [item(f"http://127.0.0.19:8190/product/{i}.html", {"sku": f"SKU-{i}", "price": i}, 0)
                    for i in range(10)]  # fmt: skip
        by_sku = item(URLS[1], {"sku": "SKU-1", "price": 99}, 10, item_key="sku")
        _send(sink_cluster, "items", [*products, by_sku])
        wait_count(postgres, pg_schema, "items", 11, timeout=90)
        stored = {r["item_key"]: r for r in rows(postgres, pg_schema, "items", "item_key")}
        assert stored["SKU-1"]["item"] == {"sku": "SKU-1", "price": 99}
        assert stored[products[2]["url"]]["item"] == {"sku": "SKU-2", "price": 2}
        unchanged = stored[products[2]["url"]]

        # Seen again unchanged: last_seen moves, nothing else; changed: content and last_changed move.
        _send(sink_cluster, "items", [item(products[2]["url"], {"sku": "SKU-2", "price": 2}, 20),
                                      item(products[3]["url"], {"sku": "SKU-3", "price": 4}, 20)])
        rows_at = lambda: {r["item_key"]: r for r in rows(postgres, pg_schema, "items", "item_key")}  # noqa: E731
        from tests.support.services import wait_until

        after = wait_until(lambda: (r := rows_at()) and r[products[3]["url"]]["last_seen"] == aware(20) and
                           r[products[2]["url"]]["last_seen"] == aware(20) and r, 30)  # fmt: skip
        again = after[products[2]["url"]]
        assert again["last_changed"] == unchanged["last_changed"] == aware(0)
        assert (again["item"], again["content_hash"]) == (unchanged["item"], unchanged["content_hash"])
        assert after[products[3]["url"]]["item"]["price"] == 4
        assert after[products[3]["url"]]["last_changed"] == aware(20)
        assert count(postgres, pg_schema, "items") == 11
    finally:
        sink.close()


def test_bad_messages_are_dead_lettered_and_the_sink_goes_on(
    sink_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    dead = TopicReader(sink_cluster.settings.get_list("KAFKA_HOSTS")[0], sink_cluster.settings.topic("dead_letter"))
    bad = ["not json {", json.dumps([1, 2]), json.dumps({"url": URLS[1], "appid": "app"}),
           json.dumps(page(URLS[2], "x", 0, timestamp="yesterday")),
           json.dumps(page(URLS[3], "x", 0, status_code="200")),
           json.dumps(page(URLS[4], "nul \x00 byte", 0)),
           json.dumps(page("http://127.0.0.19/" + secrets.token_hex(4000), "too long a key for its index", 0))]
    _send(sink_cluster, "crawled_firehose", [*bad, json.dumps(page(URLS[0], "fine", 0))])
    sink = RunningSink(sink_cluster)
    try:
        wait_count(postgres, pg_schema, "pages", 2)
        letters = dead.wait_for(lambda m: len(m) >= 6, 30)
    finally:
        sink.close()
        dead.close()
    reasons = [letter["error"] for letter in letters]
    assert len(reasons) == 6
    assert all(letter["source"] == "sink" for letter in letters)
    # One reason for each bad message (partitions give no order between them); the last one passed
    # every check of the sink but PostgreSQL refused it (index row too large): its batch was written
    # message by message.
    marks = ["not valid JSON", "not a JSON object but list", "'crawlid'", "'timestamp'", "'status_code'",
             "refused by PostgreSQL"]  # fmt: skip
    assert sorted(next(i for i, mark in enumerate(marks) if mark in reason) for reason in reasons) == [0, 1, 2, 3, 4, 5]
    assert {r["url"] for r in rows(postgres, pg_schema, "pages", "url")} == {URLS[0], URLS[4]}
    assert rows(postgres, pg_schema, "pages", "url")[1]["body"] == "nul \ufffd byte"


def test_the_sinks_counters_and_heartbeat_are_in_redis_and_answered_as_the_sink_stats_kind(
    sink_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    settings = sink_cluster.settings
    ttl = settings.get_int("HEARTBEAT_TIMEOUT")
    report = StatsReport(redis_client(settings), StatsConfig.from_settings(settings), ttl)
    sink = RunningSink(sink_cluster)
    try:
        _send(sink_cluster, "crawled_firehose", ["not json {", *(page(url, "v1", 0) for url in URLS[:10])])
        ensure_topics(settings, [settings.topic("items")])  # as a crawler with a user spider does
        _send(sink_cluster, "items", [item(URLS[0], {"sku": "a"}, 0), item(URLS[1], {"sku": "b"}, 0)])
        wait_count(postgres, pg_schema, "items", 2)
        _send(sink_cluster, "crawled_firehose", [page(url, "v1", 0) for url in URLS[:10]])  # as old: no row changes
        wait_count(postgres, pg_schema, "crawl_log", 20)

        def lifetime(body: dict) -> dict[str, int]:
            counters = {"total": body["total"], "fail": body["fail"], **body["plugins"]}
            return {name: counts.get("lifetime", 0) for name, counts in counters.items()}

        expected = {"total": 23, "fail": 1, "pages": 10, "items": 2, "crawl_log": 20}
        def reached() -> dict | None:
            body = report.build("sink")
            return body if lifetime(body) == expected else None

        body = wait_until(reached, 15, message="the sink's counters never reached Redis")
        assert sum(len(ids) for ids in body["nodes"].values()) == 1  # this sink's heartbeat
    finally:
        sink.close()


def test_migrations_are_versioned_and_idempotent(postgres: Postgres, pg_schema: str) -> None:
    tables = Tables(schema=pg_schema, pages="p", items="i", crawl_log="l")
    with postgres.connect() as connection:
        assert migrate(connection, tables) == [version for version, _, _ in MIGRATIONS]
        assert migrate(connection, tables) == []
        assert schema_version(connection, tables) == MIGRATIONS[-1][0]
        names = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (pg_schema,)
        ).fetchall()
    assert [n for (n,) in names] == ["changes", "i", "l", "p", "revisit_log", "revisit_paused", "revisits",
                                     "sink_migrations"]  # fmt: skip


def test_password_from_a_file_and_never_logged(
    plain_cluster: TestCluster, postgres: Postgres, pg_schema: str, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = plain_cluster
    secret = tmp_path / "pw"
    secret.write_text(PASSWORD + "\n")
    sink_settings(cluster, postgres, pg_schema, SINK_POSTGRES_PASSWORD="wrong", SINK_POSTGRES_PASSWORD_FILE=secret)
    caplog.set_level("DEBUG")
    sink = RunningSink(cluster)
    try:
        _send(cluster, "crawled_firehose", [page(URLS[0], "x", 0)])
        wait_count(postgres, pg_schema, "pages", 1)
    finally:
        sink.close()
    assert "Sink started" in caplog.text
    assert PASSWORD not in caplog.text
