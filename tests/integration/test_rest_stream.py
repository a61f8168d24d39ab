"""A crawl's event stream: its progress as it changes, each of its pages, and the end."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from rest import envelope
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster, redis_of, write_progress
from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from utils.frontier import keys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def streaming(services, tmp_path_factory) -> Iterator[TestCluster]:
    with gateway_cluster(services, tmp_path_factory.mktemp("rest-sse"), REST_STREAM_INTERVAL=0.2) as cluster:
        yield cluster


class Stream:
    """Reads a stream's events in a thread into a queue: (event name, decoded data)."""

    def __init__(self, base: str, path: str) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.closed = threading.Event()
        self.content_type = ""
        self.thread = threading.Thread(target=self._read, args=(base, path), daemon=True)
        self.thread.start()

    def _read(self, base: str, path: str) -> None:
        try:
            with httpx.Client(base_url=base, timeout=60) as client, client.stream("GET", path) as response:
                self.content_type = response.headers["content-type"]
                self._parse(response.iter_lines())
        except httpx.HTTPError as exc:  # the gateway went away: the test sees the missing events
            self.events.put(("broken", str(exc)))
        finally:
            self.closed.set()

    def _parse(self, lines: Iterator[str]) -> None:
        name, data = "message", ""
        for line in lines:
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and data:
                self.events.put((name, json.loads(data)))
                name, data = "message", ""

    def next(self, timeout: float = 20) -> tuple[str, Any]:
        return self.events.get(timeout=timeout)

    def until(self, name: str, timeout: float = 30) -> list[tuple[str, Any]]:
        """Every event up to and including the first `name`."""
        seen = []
        while not seen or seen[-1][0] != name:
            seen.append(self.next(timeout))
        return seen


def page(url: str, crawlid: str) -> dict[str, Any]:
    return {"url": url, "response_url": url, "status_code": 200, "success": True, "appid": "sseapp",
            "crawlid": crawlid, "body": "<html>big</html>", "links": [{"url": url + "/x", "text": "x"}],
            "timestamp": "2026-01-01T00:00:00.000000"}  # fmt: skip


def test_a_stream_carries_progress_pages_and_the_end(streaming: TestCluster) -> None:
    client = client_of(streaming)
    r: redis.Redis = redis_of(streaming)
    write_progress(r, "sseapp", "s1", enqueued=3, queued=3)
    write_progress(r, "sseapp", "s2", enqueued=1, queued=1)
    base = str(client.base_url)
    first, second = Stream(base, "/crawls/sseapp/s1/events"), Stream(base, "/crawls/sseapp/s2/events?spiderid=link")
    for stream in (first, second):
        name, data = stream.next()  # sent once the stream sees every page from here on
        assert (name, data["queued"], data["finished"]) == ("progress", 3 if stream is first else 1, False)

    progress_key = keys.crawl_progress("link", "sseapp", "s1")
    r.hset(progress_key, mapping={"crawled": 2, "queued": 1})
    seen = first.until("progress")  # the change is announced
    assert seen[-1][1]["crawled"] == 2
    urls = [f"http://127.0.0.250:9/p{n}" for n in range(3)]
    pages_out = [page(u, "s1") for u in urls] + [page("http://o/", "s2")]
    produce(streaming.settings.get_list("KAFKA_HOSTS")[0], streaming.settings.topic("crawled_firehose"), pages_out)
    while sum(1 for name, _ in seen if name == "page") < 3:
        seen.append(first.next())
    r.hset(progress_key, mapping={"crawled": 3, "queued": 0})
    seen += first.until("finished")

    pages = [data for name, data in seen if name == "page"]
    assert sorted(p["url"] for p in pages) == urls  # pages of several partitions: any order
    assert all("body" not in p and p["links"] == 1 and p["status_code"] == 200 for p in pages)
    assert [data["crawled"] for name, data in seen if name == "progress"] in ([2], [2, 3])
    name, data = seen[-1]
    assert (name, data["finished"], data["crawled"], data["percent"]) == ("finished", True, 3, 100.0)
    assert first.closed.wait(10), "the stream did not end after `finished`"

    assert second.until("page")[-1][1]["url"] == "http://o/"
    r.hset(keys.crawl_progress("link", "sseapp", "s2"), mapping={"crawled": 1, "queued": 0})
    assert [name for name, _ in second.until("finished")] in (["finished"], ["progress", "finished"])
    assert first.content_type.startswith("text/event-stream")


def test_the_stream_of_an_unknown_crawl_is_404(streaming: TestCluster) -> None:
    response = client_of(streaming).get("/crawls/sseapp/nothing/events")
    assert response.status_code == 404
    assert envelope_error(response)["message"] == envelope.NO_CRAWL
