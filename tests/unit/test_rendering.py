"""The render spider's pieces that need no browser: scripted demo pages, settle options, retry fate,
the memory helper and the spider's Scrapy settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.settings import Settings as ScrapySettings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.rendering import RenderError, RenderTimeout, wait_selector
from crawler.retry import RetryPolicy
from crawler.runner import scrapy_settings
from crawler.spiders import SPIDERS
from crawler.spiders.render import HANDLER, RenderSpider
from utils.config.settings import Settings
from utils.demosite import add_scripted_pages, generate_site, scripted_urls
from utils.observability.process_memory import descendants, named, process_rss, tree_pss


def scripted_site():
    site = generate_site(hosts=2, pages_per_host=3, seed=4, network="127.20.0", base_ip_octet=90, port=8999)
    add_scripted_pages(site, 12, seed=4)
    return site


def test_scripted_pages_have_no_link_in_their_html_and_reach_every_page_once_rendered() -> None:
    site = scripted_site()
    urls = scripted_urls(site)
    assert len(urls) == 24
    for url in urls:
        page = site.pages[url]
        shell = HtmlResponse(url=url, body=page.body, encoding="utf-8")
        assert LinkExtractor().extract_links(shell) == []  # what the link spider sees
        data = json.loads(site.pages[url.replace(".html", ".json")].body)
        assert [url.rsplit("/js/", 1)[0] + link["href"] for link in data["links"]] == page.rendered_links
        assert page.rendered_links
        assert url not in page.rendered_links
    host = urls[0].rsplit("/js/", 1)[0]
    chain = {f"{host}/js/{(n + 1) % 12}.html" for n in range(12)}
    assert chain <= {link for url in urls if url.startswith(host) for link in site.pages[url].rendered_links}


@pytest.mark.parametrize(("attrs", "expected"), [
    ({"wait_for": "#ready"}, "#ready"), ({"wait_for": "  "}, None), ({"wait_for": 3}, None), ({}, None), (None, None),
])  # fmt: skip
def test_the_selector_to_wait_for_comes_from_the_crawls_attrs(attrs: object, expected: str | None) -> None:
    assert wait_selector({"attrs": attrs}) == expected


def test_a_render_timeout_is_retried_then_dead_lettered() -> None:
    scrapy_settings = ScrapySettings()
    policy = RetryPolicy.from_settings(Settings.load(environ={}), scrapy_settings.getlist("RETRY_EXCEPTIONS"))
    for error in (RenderTimeout("did not settle"), RenderError("net::ERR_CONNECTION_REFUSED")):
        assert policy.decide(Failure(error), 0).outcome == "retry"
        assert policy.decide(Failure(error), policy.times).outcome == "dead"


def test_the_render_spider_is_listed_and_downloads_through_the_browser_with_its_own_concurrency() -> None:
    assert SPIDERS["render"] is RenderSpider
    settings = scrapy_settings(Settings.load(environ={}, overrides=["RENDER_MAX_PAGES=3"]))  # with Shoal's add-on
    crawler = get_crawler(RenderSpider, settings)
    handlers = crawler.settings.getdict("DOWNLOAD_HANDLERS")
    assert (handlers["http"], handlers["https"]) == (HANDLER, HANDLER)
    assert crawler.settings.getint("CONCURRENT_REQUESTS") == 6  # 3 tabs, each with its next page leased
    assert load_object(HANDLER).lazy is False


def test_process_memory_of_a_child_tree() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(50 * 2**20); time.sleep(30)"])
    try:
        def found() -> list:
            return [p for p in descendants(None, named("python")) if p.pid == child.pid]

        for _ in range(100):
            if found() and process_rss(child.pid) > 50 * 2**20:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert process_rss(child.pid) > 50 * 2**20
        assert tree_pss(found()) > 45 * 2**20  # its private 50 MiB count whole
        assert process_rss(os.getpid()) > 0
    finally:
        child.kill()
        child.wait()
    assert process_rss(child.pid) == 0  # gone: 0, not an error
