"""A real crawler against the hostile site (utils/demosite/hostile.py): each hostile input ends as
exactly one page message (or dead letter), the crawler stays up and goes on with the next crawl;
and the address policy refuses what it must, counted with its reason."""

from __future__ import annotations

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import EchoServer, progress, seed, settled
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite.hostile import HostileSite
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOST = "127.22.0.10"
LINKS_KEPT = 20
HOSTILE = {
    # 10 s: the chunked body must reach DOWNLOAD_MAXSIZE (40 MB, decoded chunk by chunk) before the
    # timeout even with the other worker's tests on the CPU; the trickle still times out.
    "QUEUE_HITS": 0, "RETRY_TIMES": 0, "DOWNLOAD_TIMEOUT": 10, "ROBOTSTXT_OBEY": False,
    "DOWNLOAD_MAXSIZE": 40 * 1024 * 1024,  # the 1,000,000-link page (27 MB of HTML) gets parsed; bombs still don't
    "LINKS_PER_PAGE_MAX": LINKS_KEPT,
}  # fmt: skip
# crawlid -> (path, what its one page message says)
EXPECTED = {
    "big": ("/big", "DownloadCancelledError"),
    "chunked": ("/big-chunked", "DownloadCancelledError"),
    "gzip": ("/gzip-bomb", "DOWNLOAD_MAXSIZE"),
    "br": ("/br-bomb", "DOWNLOAD_MAXSIZE"),
    "zstd": ("/zstd-bomb", "DOWNLOAD_MAXSIZE"),
    "loop": ("/loop", "max redirections"),
    "trickle": ("/trickle", "Timeout"),
}


@pytest.mark.parametrize("cluster", [HOSTILE], indirect=True)
def test_each_hostile_input_ends_as_one_page_message_and_the_crawler_goes_on(
    cluster: TestCluster, topic_reader
) -> None:
    firehose = topic_reader("crawled_firehose")
    with HostileSite(HOST, free_port(HOST)) as site:
        crawler = start_crawler_process(cluster)
        for crawlid, (path, _) in EXPECTED.items():
            seed(cluster, site.url(path), crawlid=crawlid)
        seed(cluster, site.url("/links"), crawlid="links", maxdepth=1)
        for crawlid in [*EXPECTED, "links"]:
            wait_until(lambda c=crawlid: settled(progress(cluster, c)), timeout=120, message=f"{crawlid} not settled")
        assert crawler.alive()
        seed(cluster, site.url("/"), crawlid="after")  # the crawler still works
        wait_until(lambda: settled(progress(cluster, "after")), timeout=60)
    pages = firehose.wait_for(lambda got: {p["crawlid"] for p in got} >= {*EXPECTED, "links", "after"}, timeout=60)
    for crawlid, (path, error) in EXPECTED.items():
        (page,) = [p for p in pages if p["crawlid"] == crawlid]
        assert page["success"] is False and error in page["exception"], page  # noqa: PT018
        assert page["url"] == site.url(path)
        assert len(page.get("body") or "") < 1024 * 1024  # never the 200 MB
    (trickle,) = redis_client(cluster.settings).lrange(keys.dead_letters("link", "testapp", "trickle"), 0, -1)
    assert b"/trickle" in trickle
    (links,) = [p for p in pages if p["crawlid"] == "links" and p["url"] == site.url("/links")]
    assert links["status_code"] == 200 and len(links["links"]) == LINKS_KEPT  # noqa: PT018
    assert progress(cluster, "links")["enqueued"] == 1 + LINKS_KEPT
    assert "Links capped" in crawler.log_path.read_text()
    assert [p["status_code"] for p in pages if p["crawlid"] == "after"] == [200]


def start_crawler_process(cluster: TestCluster):  # noqa: ANN201 - a tests.support.cluster.Component
    start_crawler(cluster)
    return cluster.components[-1]


POLICY = {"QUEUE_HITS": 0, "RETRY_TIMES": 0, "ROBOTSTXT_OBEY": False,
          "ADDRESS_DENIED_NETWORKS": "169.254.0.0/16,127.22.0.20/32,127.0.0.1/32"}  # fmt: skip


@pytest.mark.parametrize("cluster", [POLICY], indirect=True)
def test_the_address_policy_refuses_redirect_targets_and_connected_addresses_and_counts_them(
    cluster: TestCluster, topic_reader
) -> None:
    firehose = topic_reader("crawled_firehose")
    local_port = free_port("127.0.0.1")
    with HostileSite(HOST, free_port(HOST)) as site, EchoServer("127.22.0.20", free_port("127.22.0.20")) as denied, \
            EchoServer("127.0.0.1", local_port) as local:  # fmt: skip
        start_crawler(cluster)
        # redirects to a denied address and to cloud metadata: the targets are never fetched
        seed(cluster, site.url(f"/redirect?to={denied.base}/secret"), crawlid="redirect")
        seed(cluster, site.url("/redirect?to=http://169.254.169.254/latest/meta-data/"), crawlid="metadata")
        # a host name whose address is denied: only the address actually connected to tells
        seed(cluster, f"http://localhost:{local_port}/by-name", crawlid="byname")
        seed(cluster, site.url("/"), crawlid="allowed")
        for crawlid in ("redirect", "metadata", "byname", "allowed"):
            wait_until(lambda c=crawlid: settled(progress(cluster, c)), timeout=60, message=f"{crawlid} not settled")
        assert not denied.of("/secret")
    for crawlid in ("redirect", "metadata", "byname"):
        counts = progress(cluster, crawlid)
        assert counts.get("dropped_address") == 1 and not counts.get("crawled"), (crawlid, counts)  # noqa: PT018
    pages = firehose.wait_for(lambda got: any(p["crawlid"] == "allowed" for p in got), timeout=30)
    assert {p["crawlid"] for p in pages} == {"allowed"}  # nothing from a refused address reached the firehose
    assert not local.of("/by-name")  # refused when its name resolved, before any connection
