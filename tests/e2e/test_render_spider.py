"""The render spider: pages whose links exist only after JavaScript, loaded in Debian's Chromium.

Real processes against the session services; the scripted pages of the demo site served on
127.20.0.x (this work's loopback range). Browser tests are kept small: the machine is shared.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, add_scripted_pages, generate_site, scripted_urls
from utils.demosite.generator import Site
from utils.demosite.scripted import NEVER_PATH, READY_SELECTOR
from utils.frontier import keys
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

CHROMIUM = Path("/usr/bin/chromium")
SCRIPTED = 8  # scripted pages on the one host
RENDER = {"RENDER_MAX_PAGES": 2, "RENDER_PAGES_PER_CONTEXT": 3, "RENDER_PAGES_PER_BROWSER": 5,
          "RENDER_STATS_INTERVAL": 0.5, "QUEUE_HITS": 100, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}  # fmt: skip


@pytest.fixture
def scripted_site() -> Iterator[tuple[Site, SiteServer]]:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium"
    site = generate_site(hosts=1, pages_per_host=5, seed=3, network="127.20.0", base_ip_octet=10, port=free_port())
    add_scripted_pages(site, SCRIPTED, seed=3)
    with SiteServer(site) as server:
        yield site, server


def crawl(cluster: TestCluster, url: str, spiderid: str, crawlid: str, **fields: object) -> None:
    request = {"url": url, "appid": "renderapp", "crawlid": crawlid, "spiderid": spiderid, **fields}
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [request])


@pytest.mark.parametrize("cluster", [RENDER], indirect=True)
def test_link_spider_sees_no_scripted_link_and_render_spider_sees_them_all(
    cluster: TestCluster, scripted_site, topic_reader
) -> None:
    site, server = scripted_site
    pages = {url: site.pages[url] for url in scripted_urls(site)}
    seed = next(url for url in pages if url.endswith("/js/0.html"))
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link", name="link")
    renderer = cluster.start("crawl", "--spider", "render", name="render")
    firehose = topic_reader("crawled_firehose")
    crawl(cluster, seed, "link", "plain", maxdepth=20)
    crawl(cluster, seed, "render", "rendered", maxdepth=20, attrs={"wait_for": READY_SELECTOR})

    firehose.wait_for(lambda got: len([p for p in got if p["crawlid"] == "rendered"]) >= len(pages)
                            and any(p["crawlid"] == "plain" for p in got), timeout=180,
                            message=f"expected {len(pages)} rendered pages and 1 plain one")  # fmt: skip
    firehose.poll(2.0)
    plain = [p for p in firehose.messages if p["crawlid"] == "plain"]
    assert [(p["url"], p["links"]) for p in plain] == [(seed, [])]  # the shell has no link at all
    rendered = {p["url"]: p for p in firehose.messages if p["crawlid"] == "rendered"}
    assert set(rendered) == set(pages)
    for url, page in rendered.items():
        assert (page["success"], page["status_code"]) == (True, 200)
        assert {link["url"] for link in page["links"]} == set(pages[url].rendered_links)
        assert 'id="ready"' in page["body"]  # the rendered DOM, not the shell
    assert server.hits[(site.hosts[0], "/js/pixel.png")] == 0  # images are blocked by default
    assert server.hits[(site.hosts[0], "/js/app.js")] >= 1  # the page's own requests, straight from the browser
    stats = wait_until(lambda: render_figures(cluster, len(pages)), timeout=30, message="no render figures")
    assert int(stats["browser_restarts"]) >= 1  # RENDER_PAGES_PER_BROWSER = 5 < 8 pages
    assert renderer.alive()


def render_figures(cluster: TestCluster, pages: int) -> dict[str, str] | None:
    """The figures the render process wrote for the dashboard, once they count `pages` pages."""
    client = redis_client(cluster.settings, decode=True)
    for member in client.zrange(keys.RENDERERS, 0, -1):
        figures = client.hgetall(keys.render_figures(*member.rsplit(":", 1)))
        if int(figures.get("pages", 0)) >= pages:
            return figures
    return None


@pytest.mark.parametrize("cluster", [{**RENDER, "RENDER_TIMEOUT": 2, "RETRY_TIMES": 1,
                                      "RETRY_BACKOFF_BASE": 0.1}], indirect=True)  # fmt: skip
def test_a_page_that_never_settles_is_dead_lettered_after_its_retries(
    cluster: TestCluster, scripted_site, topic_reader
) -> None:
    site, server = scripted_site
    url = f"http://{site.hosts[0]}{NEVER_PATH}"
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "render", name="render")
    firehose = topic_reader("crawled_firehose")
    dead = topic_reader("dead_letter")
    crawl(cluster, url, "render", "never")
    letters = dead.wait_for(lambda got: len(got) >= 1, timeout=120, message="no dead letter")
    assert [(m["url"], m["attempts"]) for m in letters] == [(url, 2)]  # 1 try + RETRY_TIMES retries
    assert "RenderTimeout" in letters[0]["error"]
    failed = firehose.wait_for(lambda got: len(got) >= 1, timeout=30)
    assert [(p["url"], p["success"]) for p in failed] == [(url, False)]
    client = redis_client(cluster.settings)
    wait_until(lambda: client.zcard(keys.inflight("render")) == 0, timeout=30)  # no stuck lease
