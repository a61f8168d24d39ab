"""Issue 31: the sink's revisit state in a real PostgreSQL, written in the page's transaction, and the
revisit component's claims (FOR UPDATE SKIP LOCKED) over it. Fetch times are stamped in the past so a
row's due time is decided by the test, not by waiting."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import ujson

from revisit.claims import claim, release
from revisit.loop import Revisit
from revisit.requests import crawl_request
from sink.messages import Parser
from sink.schema import Tables
from sink.store import Store
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from tests.support.sink import page, rows, sink_settings
from utils import schemas
from utils.freshness import state
from utils.services import LocalServices

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

URL = "http://127.0.0.1:8190/product/1.html"
POLICY = {"interval": 100.0, "min": 10.0, "max": 400.0, "inc": 2.0, "dec": 0.5, "error_interval": 30.0,
          "gone_interval": 0.0, "pages": None, "priority": None, "follow": False,
          "request": {"spiderid": "link", "maxdepth": 2, "curdepth": 1, "priority": 5}}  # fmt: skip
BASE = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=2)


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes


def moment(seconds: float) -> datetime:
    return (BASE + timedelta(seconds=seconds)).replace(tzinfo=UTC)


def stamp(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).isoformat()


def fetch(at: float, body: str = "<p>A</p>", status: int = 200, etag: str | None = '"a"', **more: Any) -> dict:
    message = page(URL, body, 0, revisit=POLICY, **more)
    message.update(timestamp=stamp(at), status_code=status)
    if etag:
        message["response_headers"] = {"Etag": [etag], "Last-Modified": ["Tue, 24 Nov 2026 06:00:00 GMT"]}
    if status == 304:
        message.update(not_modified=True, body=None)
    return message


class Sink:
    """The sink's parse and write path, one batch per call (what sink/loop.py does after a poll)."""

    def __init__(self, postgres: Postgres, schema: str) -> None:
        self.store = Store(f"{postgres.dsn}?password={postgres.password}", Tables(schema=schema))
        self.parser = Parser("demo.items")
        self.offset = 0

    def write(self, *messages: dict[str, Any], topic: str = "demo.crawled_firehose") -> None:
        records = []
        for message in messages:
            self.offset += 1
            records.append(Record(topic, 0, self.offset, ujson.dumps(message).encode()))
        parsed = self.parser.parse(records)  # type: ignore[arg-type]
        assert not parsed.dead_letters
        self.store.write(parsed)


@pytest.fixture
def sink(postgres: Postgres, pg_schema: str) -> Sink:
    return Sink(postgres, pg_schema)


def revisit_row(postgres: Postgres, schema: str) -> dict[str, Any]:
    (row,) = rows(postgres, schema, "revisits", "url")
    return row


def feed(postgres: Postgres, schema: str, now: datetime | None = None) -> list[Any]:
    """Claim what is due at `now` (the server's clock unless given), as the revisit component does (its lease:
    an hour)."""
    with postgres.connect() as connection:
        return claim(connection, schema, 100, 3600, now=now)


def test_not_modified_grows_the_interval_to_max_changed_shrinks_it_to_min(
    sink: Sink, postgres: Postgres, pg_schema: str
) -> None:
    sink.write(fetch(0))
    row = revisit_row(postgres, pg_schema)
    assert (row["interval_s"], row["etag"], row["unchanged_count"]) == (100.0, '"a"', 0)
    assert row["next_due"] == row["last_fetch"] + timedelta(seconds=100)
    (due,) = feed(postgres, pg_schema, now=moment(100))
    request = schemas.validate("crawl", crawl_request(due, 1))  # what the kafka monitor will accept
    assert request["headers"] == {"If-None-Match": '"a"', "If-Modified-Since": "Tue, 24 Nov 2026 06:00:00 GMT"}
    assert (request["refetch"], request["maxdepth"], request["priority"]) == (True, 0, 4)
    assert feed(postgres, pg_schema, now=moment(150)) == []  # claimed: not due again until the lease ends

    before = rows(postgres, pg_schema, "pages", "url")[0]
    intervals = []
    for at in (200, 400, 600, 800):
        sink.write(fetch(at, body="", status=304, etag=None))
        intervals.append(revisit_row(postgres, pg_schema)["interval_s"])
    assert intervals == [200.0, 400.0, 400.0, 400.0]
    after = rows(postgres, pg_schema, "pages", "url")[0]
    assert (after["body"], after["content_hash"], after["last_changed"]) == (
        before["body"], before["content_hash"], before["last_changed"])  # no new version
    assert after["fetched_at"] > before["fetched_at"]
    row = revisit_row(postgres, pg_schema)
    assert (row["etag"], row["unchanged_count"], row["fed_at"]) == ('"a"', 4, None)  # the 304 kept the validators

    sink.write(fetch(900, body="<p>A</p>"))  # a 200 with the same content counts as unchanged
    assert revisit_row(postgres, pg_schema)["unchanged_count"] == 5
    shrinking = []
    for i, at in enumerate((1000, 1100, 1200, 1300, 1400, 1500)):
        sink.write(fetch(at, body=f"<p>B{i}</p>", etag=f'"b{i}"'))
        shrinking.append(revisit_row(postgres, pg_schema)["interval_s"])
    assert shrinking == [200.0, 100.0, 50.0, 25.0, 12.5, 10.0]
    assert rows(postgres, pg_schema, "pages", "url")[0]["body"] == "<p>B5</p>"
    changes = rows(postgres, pg_schema, "changes", "id")
    assert len(changes) == 6  # once per change
    assert changes[1]["old_hash"] == changes[0]["new_hash"]
    assert revisit_row(postgres, pg_schema)["unchanged_count"] == 0


def test_a_replayed_batch_changes_nothing_twice(sink: Sink, postgres: Postgres, pg_schema: str) -> None:
    batch = [fetch(0), fetch(100, body="<p>B</p>")]
    sink.write(batch[0])
    sink.write(batch[1])
    sink.write(*batch)  # a sink killed before committing its offsets: the batch comes again
    assert len(rows(postgres, pg_schema, "changes", "id")) == 1
    assert revisit_row(postgres, pg_schema)["interval_s"] == 50.0


def test_a_page_fetched_for_an_earlier_claim_does_not_end_a_newer_one(
    sink: Sink, postgres: Postgres, pg_schema: str
) -> None:
    """The sink was down past the lease: the row was fed again, then the first feed's page came back."""
    sink.write(fetch(0))  # due at 100
    with postgres.connect() as connection:
        assert len(claim(connection, pg_schema, 10, 50, now=moment(100))) == 1
        assert len(claim(connection, pg_schema, 10, 50, now=moment(150))) == 1  # lease over, nothing came back
        sink.write(fetch(101, body="<p>B</p>"))  # the first feed's page, replayed late
        row = revisit_row(postgres, pg_schema)
        assert (row["fed_at"], row["next_due"]) == (moment(150), moment(200))  # the second claim still holds
        assert (row["last_fetch"], row["interval_s"]) == (moment(101), 50.0)  # recorded
        assert claim(connection, pg_schema, 10, 50, now=moment(160)) == []  # not fed a third time
        sink.write(fetch(152, body="<p>B</p>", status=304, etag=None))  # the second feed's page
        row = revisit_row(postgres, pg_schema)
        assert row["fed_at"] is None
        assert row["next_due"] == moment(152) + timedelta(seconds=100)
    (log_101, log_152) = rows(postgres, pg_schema, "revisit_log", "id")
    assert (log_101["outcome"], log_152["outcome"]) == ("changed", "not_modified")


def test_gone_pages_stop_and_errors_wait_the_error_interval(sink: Sink, postgres: Postgres, pg_schema: str) -> None:
    sink.write(fetch(0))
    sink.write(fetch(100, body="oops", status=503))
    row = revisit_row(postgres, pg_schema)
    assert row["interval_s"] == 100.0
    assert row["next_due"] == row["last_fetch"] + timedelta(seconds=30)
    sink.write(fetch(200, body="gone", status=410))
    assert revisit_row(postgres, pg_schema)["next_due"] is None


def test_lateness_304_share_and_changes_per_crawl(sink: Sink, postgres: Postgres, pg_schema: str) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    start = (now - BASE).total_seconds() - 600  # ten minutes ago: inside the last hour
    sink.write(fetch(start))
    with postgres.connect() as connection:  # due 100 s after; claimed now
        assert len(claim(connection, pg_schema, 10, 3600)) == 1
    sink.write(fetch(start + 160, body="", status=304, etag=None))  # 60 s late
    with postgres.connect() as connection:
        connection.execute(f'UPDATE "{pg_schema}".revisits SET next_due = now() - interval \'1 s\'')
        assert len(claim(connection, pg_schema, 10, 3600)) == 1
        sink.write(fetch(start + 590, body="<p>new</p>"))
        figures = state.summary(connection, pg_schema, "app", "c1")
    assert figures["revisits_last_hour"] == 2
    assert figures["not_modified_share"] == 0.5
    assert figures["changes_per_hour"] == 1
    assert (figures["lateness_p50_s"], figures["lateness_p99_s"]) == (30.0, 59.4)  # 60 s late, then on time


def test_two_claimers_never_take_the_same_row_and_pause_holds_a_crawl(
    sink: Sink, postgres: Postgres, pg_schema: str
) -> None:
    messages = []
    for i in range(300):
        message = fetch(0)
        message["url"] = f"http://127.0.0.1:8190/p{i}.html"
        message["crawlid"] = "c1" if i < 200 else "c2"
        messages.append(message)
    sink.write(*messages)
    with postgres.connect() as connection:
        state.pause(connection, pg_schema, "app", "c2")
    taken: list[list[str]] = [[], []]

    def claimer(mine: list[str]) -> None:
        with postgres.connect() as connection:
            while found := claim(connection, pg_schema, 7, 3600):
                mine.extend(row.url for row in found)

    threads = [threading.Thread(target=claimer, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert taken[0]
    assert taken[1]
    assert len(taken[0]) + len(taken[1]) == len(set(taken[0]) | set(taken[1])) == 200  # c2 paused
    with postgres.connect() as connection:
        state.resume(connection, pg_schema, "app", "c2")
        later = claim(connection, pg_schema, 500, 3600)
        assert {row.crawlid for row in later} == {"c2"}
        release(connection, pg_schema, later[:10])
        assert len(claim(connection, pg_schema, 500, 3600)) == 10  # released rows are due again at once
        assert state.drop(connection, pg_schema, "app", "c2") == 100
        assert state.summary(connection, pg_schema, "app", "c2")["tracked"] == 0


def test_items_by_key_with_a_user_fingerprint(sink: Sink, postgres: Postgres, pg_schema: str) -> None:
    def product(at: float, price: str, views: int) -> dict[str, Any]:
        return {"appid": "app", "crawlid": "c1", "spiderid": "shop", "url": URL, "timestamp": stamp(at),
                "item_type": "Product", "item_key": "sku", "fingerprint": price,
                "item": {"sku": "X1", "price": price, "views": views}}  # fmt: skip

    sink.write(product(0, "9.99", 1), topic="demo.items")
    sink.write(product(10, "9.99", 2), topic="demo.items")  # views changed, the fingerprint did not
    assert rows(postgres, pg_schema, "changes", "id") == []
    sink.write(product(20, "8.99", 3), topic="demo.items")
    (change,) = rows(postgres, pg_schema, "changes", "id")
    assert (change["kind"], change["key"]) == ("item", "X1")
    (stored,) = rows(postgres, pg_schema, "items", "item_key")
    assert stored["item"]["price"] == "8.99"


def test_a_page_without_revisit_gets_no_state(sink: Sink, postgres: Postgres, pg_schema: str) -> None:
    plain = page(URL, "<p>x</p>", 0)
    plain["timestamp"] = stamp(0)
    sink.write(plain)
    with postgres.connect() as connection:
        found = connection.execute(f'SELECT count(*) FROM "{pg_schema}".revisits').fetchone()
    assert found == (0,)


def test_the_loop_waits_for_the_sinks_tables_then_feeds_incoming(
    services: LocalServices, tmp_path: Path, postgres: Postgres, pg_schema: str
) -> None:
    cluster = TestCluster(services, tmp_path, REVISIT_POLL=0.1)
    sink_settings(cluster, postgres, pg_schema)
    revisit = Revisit.from_settings(cluster.settings)
    stop = threading.Event()
    thread = threading.Thread(target=revisit.run, args=(stop,), daemon=True)
    thread.start()
    reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic)
    try:
        wait_until(lambda: revisit._waiting_for_tables, 30, message="the loop never looked for the tables")
        Sink(postgres, pg_schema).write(fetch(0))  # the sink creates the tables; the row is long due
        wait_until(lambda: revisit.fed == 1, 30, message="the due revisit was not fed")
        wait_until(lambda: reader.poll(0.2) or reader.messages, 30, message="nothing on the incoming topic")
    finally:
        stop.set()
        thread.join(30)
        reader.close()
    (sent,) = reader.messages
    assert (sent["url"], sent["refetch"], sent["headers"]["If-None-Match"]) == (URL, True, '"a"')
    assert not thread.is_alive()
