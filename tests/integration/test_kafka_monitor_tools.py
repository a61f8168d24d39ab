"""`shoal feed` and `shoal dump` as an operator runs them: subprocesses against the test broker."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import REPO, TestCluster
from tests.support.frontier_keys import in_shard
from tests.support.kafka import produce

pytestmark = pytest.mark.integration

CRAWL = {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "abc123"}


def shoal(cluster: TestCluster, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "utils.cli.main", "-ll", "WARNING", *argv], cwd=REPO, env=cluster.env,
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_feed_sends_one_request_given_as_an_argument(cluster: TestCluster, topic_reader) -> None:
    incoming = topic_reader("incoming")
    done = shoal(cluster, "feed", json.dumps(CRAWL))
    assert done.returncode == 0, done.stderr
    assert f"fed 1 request(s) to {cluster.settings.incoming_topic}" in done.stdout
    assert incoming.wait_for(lambda got: len(got) >= 1, timeout=15) == [CRAWL]


def test_feed_reads_one_request_per_line_from_a_file_or_stdin(
    cluster: TestCluster, topic_reader, tmp_path: Path
) -> None:
    incoming = topic_reader("incoming")
    lines = [json.dumps({**CRAWL, "crawlid": f"f{i}"}) for i in range(3)]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join([lines[0], "", lines[1], "not json"]) + "\n")
    from_file = shoal(cluster, "feed", "-f", str(path))
    assert from_file.returncode == 1  # one line was refused
    assert "fed 2 request(s)" in from_file.stdout and "1 refused (not JSON)" in from_file.stdout  # noqa: PT018
    from_stdin = shoal(cluster, "feed", stdin=lines[2] + "\n")
    assert from_stdin.returncode == 0, from_stdin.stderr
    got = incoming.wait_for(lambda got: len(got) >= 3, timeout=15)
    assert sorted(m["crawlid"] for m in got) == ["f0", "f1", "f2"]


PAGE_TEXT = "<html>héllo</html>"
PAGES: list[dict[str, Any]] = [
    {"url": "http://a.com/", "body": PAGE_TEXT, "encoding": "utf-8", "status_code": 200},
    {"url": "http://b.com/", "body": base64.b64encode(PAGE_TEXT.encode("iso-8859-1")).decode(),
     "body_encoding": "base64", "encoding": "iso-8859-1", "status_code": 200},
    {"url": "http://c.com/", "body": base64.b64encode(PAGE_TEXT.encode()).decode(), "encoding": "utf-8"},  # SC style
]  # fmt: skip


@pytest.fixture
def pages(cluster: TestCluster) -> str:
    topic = cluster.settings.topic("crawled_firehose")
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], topic, [*PAGES, "plain text, not JSON"])
    return topic


def dump(cluster: TestCluster, *options: str) -> list[str]:
    """The dumped lines, sorted (the topic has several partitions: no order across them)."""
    done = shoal(cluster, "dump", "crawled_firehose", "-b", "-n", "4", "--timeout", "20", *options)
    assert done.returncode == 0, done.stderr
    assert "Num Records: 4" in done.stderr
    return sorted(done.stdout.splitlines())


def pages_of(lines: list[str]) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in lines if line.startswith("{")), key=lambda page: page["url"])


def test_dump_from_the_beginning_prints_every_message(cluster: TestCluster, pages: str) -> None:
    lines = dump(cluster)
    assert pages_of(lines) == PAGES
    assert "plain text, not JSON" in lines  # as it is


def test_dump_no_body_and_just_body(cluster: TestCluster, pages: str) -> None:
    assert [sorted(page) for page in pages_of(dump(cluster, "-nb"))] == [sorted(set(p) - {"body"}) for p in PAGES]
    assert PAGE_TEXT in dump(cluster, "-jb")


def test_dump_decodes_base64_bodies_in_their_encoding(cluster: TestCluster, pages: str) -> None:
    assert [page["body"] for page in pages_of(dump(cluster, "-d"))] == [PAGE_TEXT, PAGE_TEXT, PAGE_TEXT]


def test_dump_pretty_prints(cluster: TestCluster, pages: str) -> None:
    done = shoal(cluster, "dump", pages, "-b", "-n", "4", "-p", "--timeout", "20")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('\n  "url": ') == 3  # one key per line, indented


def test_burst_mode_processes_what_the_topic_holds_and_exits(cluster: TestCluster) -> None:
    from utils.config.clients import ensure_topics, redis_client
    from utils.frontier import keys

    ensure_topics(cluster.settings, [cluster.settings.incoming_topic])
    crawls = [{**CRAWL, "url": f"http://burst.com/{i}", "crawlid": "burst"} for i in range(50)]
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, crawls)
    done = shoal(cluster, "kafka-monitor", "--burst")
    assert done.returncode == 0, done.stdout[-2000:]
    assert (
        redis_client(cluster.settings).zcard(
            in_shard(redis_client(cluster.settings), keys.queue("link", "burst.com"), "burst.com")
        )
        == 50
    )
