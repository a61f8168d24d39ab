"""Extraction off (the default) costs nothing: no worker process, trafilatura and extruct never imported."""

from __future__ import annotations

import subprocess
import sys

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler.extraction import ExtractionMiddleware, wanted
from tests.support.cluster import REPO
from utils.config.settings import Settings


def test_the_crawler_s_modules_import_no_extractor() -> None:
    code = ("import sys, crawler.addon, crawler.extraction, crawler.spiders.link, crawler.pipelines; "
            "print(sorted(m for m in ('trafilatura', 'extruct', 'justext', 'htmldate') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_page_of_a_crawl_that_asks_nothing_passes_untouched_and_starts_no_worker() -> None:
    settings = Settings.load(environ={})
    middleware = ExtractionMiddleware(get_crawler(settings_dict={"SHOAL": settings}), settings)
    request = Request("http://127.0.0.1/a.html", meta={"appid": "a", "crawlid": "c"})
    response = HtmlResponse(request.url, body=b"<html><body><p>hello</p></body></html>", request=request)
    assert middleware.process_response(request, response) is response
    assert middleware._pool is None


def test_the_crawl_s_fields_and_the_default_setting_decide() -> None:
    assert wanted({}, ()) == ((), None)
    assert wanted({}, ("text",)) == (("text",), None)  # EXTRACT_DEFAULT
    assert wanted({"extract": [], "near_duplicates": "skip"}, ("text",)) == ((), "skip")  # the crawl says none
    assert wanted({"extract": ["markdown"]}, ()) == (("markdown",), None)
