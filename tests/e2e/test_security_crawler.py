"""Issue 24's attacks on a real `shoal crawl` process, its Redis and broker, and loopback servers.

- a `file://` request that reached the frontier (from before the schemas refused it, or written by
  hand) never puts a local file (the process environment with its keys) on the firehose;
- a crawl's proxy credentials never appear in its page messages (PROXY_LIST empty, so no pool
  middleware strips them);
- a page that can never be sent to Kafka ends as a dead letter, not a lease renewed forever.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from tests.e2e.test_crawler_helpers import EchoServer, crawler_started, progress, seed
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils import schemas
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

OPEN = {"QUEUE_HITS": 0}
ECHO_HOST = "127.24.0.20"


def start_crawler(cluster: TestCluster) -> None:
    cluster.start("crawl", "--spider", "link")
    wait_until(lambda: crawler_started(cluster), timeout=30, message="crawler did not start")


def enqueue_unchecked(cluster: TestCluster, url: str, crawlid: str, domain: str) -> None:
    """A stored request as an older monitor (or a hand-written one) would have left it: no URL check."""
    message = schemas.validate("crawl", {"url": "http://placeholder.example.com/", "appid": "testapp",
                                         "crawlid": crawlid})  # fmt: skip
    record = crawl_request.to_record({**message, "url": url})
    entry = NewRequest(spiderid="link", domain=domain, priority=record["priority"], appid="testapp",
                       crawlid=crawlid, **crawl_request.encode(record)._asdict(), fingerprint=None, max_pages=0,
                       seed=True)  # fmt: skip
    assert Frontier.from_settings(cluster.settings, redis_client(cluster.settings)).enqueue([entry]) == ["queued"]


@pytest.mark.parametrize("cluster", [{**OPEN, "REST_API_KEY": "KEY-IN-ENVIRON"}], indirect=True)
def test_a_file_url_in_the_frontier_never_reads_the_local_file(cluster: TestCluster, topic_reader) -> None:
    firehose = topic_reader("crawled_firehose")
    start_crawler(cluster)
    enqueue_unchecked(cluster, "file:///proc/self/environ", "environ", "localhost")
    wait_until(lambda: progress(cluster, "environ").get("inflight", 1) == 0
               and progress(cluster, "environ").get("queued", 1) == 0, timeout=60)  # fmt: skip
    firehose.poll(2.0)
    text = json.dumps(firehose.messages)
    assert "KEY-IN-ENVIRON" not in text
    assert "SHOAL_" not in text
    pages = [p for p in firehose.messages if p.get("crawlid") == "environ"]
    assert all(not p["success"] and not p.get("body") for p in pages)


@pytest.mark.parametrize("cluster", [{**OPEN, "PROXY_REQUEST_ALLOWED": "*"}], indirect=True)
def test_proxy_credentials_never_reach_the_firehose(cluster: TestCluster, topic_reader) -> None:
    firehose = topic_reader("crawled_firehose")
    with EchoServer(ECHO_HOST, free_port(ECHO_HOST)) as echo:
        start_crawler(cluster)
        proxy = echo.base.replace("http://", "http://alice:PROXY-PASSWORD@")
        seed(cluster, "http://127.24.0.21:9/via-proxy", crawlid="proxied", proxy=proxy)
        pages = firehose.wait_for(lambda got: len(got) >= 1, timeout=30)
        assert echo.of("via-proxy")[0]["headers"]["Proxy-Authorization"]  # the proxy did get them
    # the body is what the proxy (an echo server) answered: it shows what it received, as it should
    text = json.dumps([{k: v for k, v in page.items() if k != "body"} for page in pages])
    assert "PROXY-PASSWORD" not in text
    assert base64.b64encode(b"alice:PROXY-PASSWORD").decode() not in text
    assert not any(name.lower() == "proxy-authorization" for name in pages[0]["request_headers"])


class PaddedHeaders:
    """Answers every request with a small page whose headers are ~120 KB: too large for Kafka even
    without its body (the page message carries the response headers)."""

    def __init__(self, host: str) -> None:
        outer = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer.hits.append(self.path)
                self.send_response(200 if self.path != "/robots.txt" else 404)
                self.send_header("Content-Type", "text/html")
                for i in range(12):
                    self.send_header(f"X-Pad-{i}", "p" * 10_000)
                self.send_header("Content-Length", "13")
                self.end_headers()
                self.wfile.write(b"<html></html>")

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, free_port(host)), Handler)
        self.base = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("cluster", [{**OPEN, "KAFKA_PRODUCER_MAX_REQUEST_SIZE": 1000}], indirect=True)
def test_a_page_that_can_never_be_sent_ends_as_a_dead_letter(cluster: TestCluster) -> None:
    """Even without its body the page is over the producer's limit: released, it came back forever."""
    server = PaddedHeaders("127.24.0.22")
    try:
        start_crawler(cluster)
        seed(cluster, f"{server.base}/big", crawlid="big")
        wait_until(lambda: progress(cluster, "big").get("dead", 0) == 1, timeout=60,
                   message="the unsendable page never ended")  # fmt: skip
        counts: dict[str, Any] = progress(cluster, "big")
        assert counts.get("inflight", 0) == 0
        assert counts.get("queued", 0) == 0
        time.sleep(2)
        assert server.hits.count("/big") == 1  # fetched once, not again and again
    finally:
        server.close()
    letters = redis_client(cluster.settings, decode=True).lrange(keys.dead_letters("link", "testapp", "big"), 0, -1)
    assert len(letters) == 1
    assert "MessageSizeTooLargeError" in json.loads(letters[0])["error"]  # the refusal, named in the letter


@pytest.mark.parametrize("cluster", [OPEN], indirect=True)
def test_numeric_spellings_of_a_blacklisted_address_are_not_fetched(cluster: TestCluster, zk_client) -> None:
    """ZooKeeper blacklists 127.24.0.23; seeds spell it 2132279319, 0x7f.0x18.0.23 and 0177.030.0.027."""
    path = cluster.settings.zookeeper_config_path
    zk_client.ensure_path(path)
    zk_client.set(path, yaml.safe_dump({"domains": {}, "blacklist": ["127.24.0.23"]}).encode())
    with EchoServer("127.24.0.23", free_port("127.24.0.23")) as banned, \
            EchoServer("127.24.0.24", free_port("127.24.0.24")) as control:  # fmt: skip
        start_crawler(cluster)
        port = banned.base.rsplit(":", 1)[1]
        for i, host in enumerate(["2132279319", "0x7f.0x18.0.23", "0177.030.0.027"]):
            seed(cluster, f"http://{host}:{port}/spelt{i}", crawlid="banned")
        seed(cluster, f"{control.base}/ok", crawlid="control")
        wait_until(lambda: control.of("/ok"), timeout=30, message="the control page was never fetched")
        time.sleep(3.0)  # the blacklisted seeds had as long as the control one, and more
        assert not banned.of("spelt0") and not banned.of("spelt1") and not banned.of("spelt2")  # noqa: PT018
        assert progress(cluster, "banned").get("crawled", 0) == 0


@pytest.mark.parametrize("cluster", [OPEN], indirect=True)
@pytest.mark.parametrize("regex", ["(", "(a)\\1", "(?<=a)b"])
def test_a_crawl_with_a_regex_re2_refuses_settles_instead_of_holding_its_lease(
    cluster: TestCluster, topic_reader, regex: str
) -> None:
    """Such a crawl is refused by the kafka monitor; one already in the frontier must still end."""
    firehose = topic_reader("crawled_firehose")
    with EchoServer(ECHO_HOST, free_port(ECHO_HOST)) as echo:
        start_crawler(cluster)
        seed(cluster, f"{echo.base}/page", crawlid="regex", maxdepth=2, allow_regex=[regex])
        wait_until(lambda: progress(cluster, "regex").get("crawled", 0) == 1, timeout=30,
                   message="the page's lease never settled")  # fmt: skip
        pages = firehose.wait_for(lambda got: len(got) >= 1, timeout=30)
        assert pages[0]["links"] == []
        assert progress(cluster, "regex").get("inflight", 0) == 0
