"""The sink's faults: PostgreSQL crashing and coming back, and a sink killed with SIGKILL mid-batch.

In both, every message ends up stored exactly once: nothing is committed to Kafka before its
transaction, and a replayed batch changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from tests.support.sink import RunningSink, count, page, sink_settings, wait_count
from utils.services import LocalServices

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture
def plain_cluster(services: LocalServices, tmp_path: Path) -> Iterator[TestCluster]:
    test_cluster = TestCluster(services, tmp_path)
    yield test_cluster
    test_cluster.stop_all()


def _pages(start: int, n: int) -> list[dict[str, object]]:
    return [page(f"http://127.0.0.19:8190/f{i}.html", f"<p>{i}</p>", i) for i in range(start, start + n)]


def _send(cluster: TestCluster, messages: list[dict[str, object]]) -> None:
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("crawled_firehose"), messages)


def test_postgres_crash_holds_the_batch_and_resumes_without_loss(
    plain_cluster: TestCluster, own_postgres: Postgres, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    sink_settings(plain_cluster, own_postgres, pg_schema, SINK_RETRY_MAX_BACKOFF=0.5)
    caplog.set_level("INFO", logger="sink")
    sink = RunningSink(plain_cluster)
    try:
        _send(plain_cluster, _pages(0, 200))
        wait_count(own_postgres, pg_schema, "crawl_log", 200)
        own_postgres.service.kill()  # a crash: SIGKILL, recovery on the next start
        _send(plain_cluster, _pages(200, 300))
        wait_until(lambda: "PostgreSQL unavailable" in caplog.text, 30)
        own_postgres.service.start()
        own_postgres.service.wait_ready(60)
        wait_count(own_postgres, pg_schema, "crawl_log", 500)
        wait_count(own_postgres, pg_schema, "pages", 500)
    finally:
        sink.close()
    messages = [record.getMessage() for record in caplog.records if record.name == "sink.loop"]
    assert messages.count("PostgreSQL unavailable; holding the batch and retrying with back-off") == 1
    assert messages.count("PostgreSQL available again; writing resumed") == 1


def test_a_sink_killed_mid_batch_loses_and_duplicates_nothing(
    plain_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    total = 20000
    sink_settings(plain_cluster, postgres, pg_schema, SINK_BATCH=500)
    _send(plain_cluster, _pages(0, total))
    first = plain_cluster.start("sink", name="sink-1")
    wait_until(lambda: count(postgres, pg_schema, "crawl_log") >= 2000, 90, interval=0.01,
               message=f"the sink stored too little:\n{first.log_tail()}")  # fmt: skip
    first.kill()
    stored = count(postgres, pg_schema, "crawl_log")
    assert stored < total, "the sink finished before it could be killed mid-way"
    second = plain_cluster.start("sink", name="sink-2")
    wait_count(postgres, pg_schema, "crawl_log", total, timeout=120)
    wait_count(postgres, pg_schema, "pages", total)
    assert second.alive()


def _suspend_server(postgres: Postgres) -> list[psutil.Process]:
    """SIGSTOP the postmaster first (no new backends start), then every backend still alive: one
    that ends between the listing and its signal (a closed test connection's) is simply skipped."""
    server = psutil.Process(postgres.service.pid)
    server.suspend()
    stopped = [server]
    for child in server.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child.suspend()
            stopped.append(child)
    return stopped


def _resume(stopped: list[psutil.Process]) -> None:
    """SIGCONT each: the postmaster, running again, reaps the backends that were already exiting."""
    for process in stopped:
        with contextlib.suppress(psutil.Error):
            process.resume()


def test_a_stalled_postgresql_fails_the_batch_at_the_deadline_and_nothing_is_lost(
    plain_cluster: TestCluster, own_postgres: Postgres, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that still accepts bytes (its kernel acknowledges them) but never answers: keepalives
    and tcp_user_timeout never fire, so only SINK_POSTGRES_OPERATION_TIMEOUT frees the sink."""
    sink_settings(plain_cluster, own_postgres, pg_schema, SINK_RETRY_MAX_BACKOFF=0.5,
                  SINK_POSTGRES_OPERATION_TIMEOUT=2)  # fmt: skip
    caplog.set_level("INFO", logger="sink")
    sink = RunningSink(plain_cluster)
    stalled: list[psutil.Process] = []
    try:
        _send(plain_cluster, _pages(0, 100))
        wait_count(own_postgres, pg_schema, "crawl_log", 100)
        stalled = _suspend_server(own_postgres)  # the sink's backend among them: sockets open, no answers
        _send(plain_cluster, _pages(100, 100))
        wait_until(lambda: "PostgreSQL unavailable" in caplog.text, 30,
                   message="the sink waits on the stalled server")  # fmt: skip
        _resume(stalled)
        wait_count(own_postgres, pg_schema, "crawl_log", 200)
        wait_count(own_postgres, pg_schema, "pages", 200)
    finally:
        _resume(stalled)
        sink.close()
