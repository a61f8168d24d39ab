"""`shoal feed --follow` and `shoal status`'s crawl table, against real Redis."""

from __future__ import annotations

import argparse
import io
import threading

import pytest
import ujson

from tests.integration.test_rest_helpers import redis_of, write_progress
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.frontier import keys, progress
from utils.frontier.progress import CrawlRef
from utils.frontier.shards import Shards
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_follow_redraws_until_the_crawl_finishes(cluster: TestCluster) -> None:
    r = redis_of(cluster)
    write_progress(r, "followapp", "f1", enqueued=4, queued=4)
    out = io.StringIO()
    result: list[int] = []
    follower = threading.Thread(
        target=lambda: result.append(
            progress.follow(r, [CrawlRef("link", "followapp", "f1")], out, window=5, interval=0.05, appear_timeout=5)
        )
    )
    follower.start()
    key = Shards.for_client(r).tags[0] + keys.crawl_progress("link", "followapp", "f1")  # where write_progress put it
    wait_until(lambda: "0.0%" in out.getvalue(), timeout=10)
    r.hset(key, mapping={"queued": 2, "crawled": 2})
    wait_until(lambda: "50.0%" in out.getvalue(), timeout=10)
    r.hset(key, mapping={"queued": 0, "crawled": 3, "failed": 1})
    follower.join(timeout=10)
    assert result == [0]
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("followapp/f1 [")
    assert "100.0%" in last
    assert "crawled 3" in last
    assert "failed 1" in last
    assert "done in" in last


def test_follow_gives_up_on_a_crawl_that_never_appears(cluster: TestCluster) -> None:
    out = io.StringIO()
    code = progress.follow(redis_of(cluster), [CrawlRef("link", "followapp", "ghost")], out, window=5,
                           interval=0.05, appear_timeout=0.3)  # fmt: skip
    assert code == 1
    assert "waiting for the crawl to be queued" in out.getvalue()
    assert "gave up" in out.getvalue()


def test_follow_command_reads_the_fed_request(cluster: TestCluster, capsys: pytest.CaptureFixture[str]) -> None:
    write_progress(redis_of(cluster), "followapp", "f2", enqueued=2, crawled=2)
    request = ujson.dumps({"url": "http://127.0.0.250:9/", "appid": "followapp", "crawlid": "f2"})
    code = progress.follow_command(cluster.settings, argparse.Namespace(json=request, file=None))
    assert code == 0
    assert "followapp/f2" in capsys.readouterr().out


def test_follow_command_needs_the_request_as_an_argument_or_a_file(
    cluster: TestCluster, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert progress.follow_command(cluster.settings, argparse.Namespace(json=None, file=None)) == 2
    assert "no crawl request to follow" in capsys.readouterr().out
    lines = tmp_path / "requests.jsonl"
    lines.write_text('{"url": "http://a.test/", "appid": "followapp", "crawlid": "f3"}\n')
    write_progress(redis_of(cluster), "followapp", "f3", enqueued=1, dead=1)
    assert progress.follow_command(cluster.settings, argparse.Namespace(json=None, file=str(lines))) == 0


def test_render_crawls_shows_running_crawls_with_bars(cluster: TestCluster) -> None:
    r = redis_of(cluster)
    write_progress(r, "statusapp", "run1", enqueued=10, crawled=5, queued=5)
    write_progress(r, "statusapp", "run2", enqueued=4, inflight=4)
    write_progress(r, "statusapp", "done1", enqueued=3, crawled=3)
    memory, *table = progress.render_crawls(cluster.settings).splitlines()
    assert memory.startswith("redis: ")
    assert "B per stored request" in memory
    assert table[0] == "crawls: 2 running, 1 finished recently"
    assert sorted(line.split()[0] for line in table[1:]) == ["statusapp/run1", "statusapp/run2"]
    assert any("50.0%" in line and "█" in line for line in table[1:])
    assert all("B of Redis per request" in line for line in table[1:])


@pytest.mark.single_redis  # a redis-server of its own, stopped and started
def test_render_crawls_says_so_when_redis_does_not_answer(cluster: TestCluster) -> None:
    settings = cluster.settings.copy_with(REDIS_PORT=free_port(), REDIS_SOCKET_TIMEOUT=1.0)
    assert progress.render_crawls(settings).startswith("crawls: unknown, Redis does not answer")
