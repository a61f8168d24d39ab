"""Issue 24's crawler-side cases that need no service: numeric host spellings, proxy credentials in
page messages, the cookie middleware's public suffix list, the download handlers, RE2 link filters."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from crawler.addon import ShoalAddon
from crawler.page import page_message
from crawler.spiders.link import page_links
from utils.frontier.domains import host_domain, url_domain


@pytest.mark.parametrize(
    "spelling",
    ["127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "::ffff:7f00:1"],
)
def test_every_spelling_of_an_address_is_one_domain_for_the_blacklist(spelling: str) -> None:
    assert host_domain(spelling) == "127.0.0.1"
    host = f"[{spelling}]" if ":" in spelling and "[" not in spelling else spelling
    assert url_domain(f"http://{host}/x") == "127.0.0.1"


@pytest.mark.parametrize("name", ["cafe.de", "123.com", "1e100.net", "www.cnn.com"])
def test_names_that_look_numeric_stay_names(name: str) -> None:
    assert not host_domain(name).replace(".", "").isdigit()


def test_proxy_credentials_never_reach_the_page_message() -> None:
    request = Request("http://a.example.com/", headers={"Proxy-Authorization": "Basic c2VjcmV0", "Accept": "x"})
    response = HtmlResponse("http://a.example.com/", body=b"<html></html>", request=request)
    headers = page_message(response)["request_headers"]
    assert "Accept" in headers
    assert not any(name.lower() == "proxy-authorization" for name in headers)


def test_the_cookie_middleware_never_fetches_the_public_suffix_list() -> None:
    """A listener stands in for the internet through HTTP(S)_PROXY: no connection may reach it."""
    import os

    from scrapy.downloadermiddlewares import cookies

    import crawler.downloader  # noqa: F401 - installs the offline splitter

    listener = socket.socket()
    listener.bind(("127.24.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    proxy = f"http://127.24.0.1:{listener.getsockname()[1]}"
    connected: list[object] = []

    def accept() -> None:
        try:
            connected.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    saved = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY")}
    os.environ.update(HTTP_PROXY=proxy, HTTPS_PROXY=proxy)
    try:
        assert cookies._is_public_domain("co.uk")
        assert not cookies._is_public_domain("www.example.co.uk")
        time.sleep(0.1)
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        thread.join()
        listener.close()
    assert not connected
    assert cookies._split_domain.suffix_list_urls == ()


def test_the_crawler_has_no_file_ftp_s3_or_data_handler() -> None:
    from scrapy.settings import Settings

    from utils.config.settings import Settings as ShoalSettings

    settings = Settings({"SHOAL": ShoalSettings.load(environ={})})
    ShoalAddon().update_settings(settings)
    handlers = settings.getdict("DOWNLOAD_HANDLERS")
    assert all(handlers[scheme] is None for scheme in ("file", "ftp", "s3", "data"))


def test_a_catastrophic_regex_runs_in_linear_time_and_an_invalid_one_follows_nothing() -> None:
    body = ('<a href="/' + "a" * 5000 + 'b">x</a><a href="/keep">k</a>').encode()
    request = Request("http://a.example.com/", meta={"allow_regex": ["(a+)+$", "keep"]})
    response = HtmlResponse("http://a.example.com/", body=body, request=request)
    started = time.process_time()  # CPU seconds: the bound holds on a loaded machine too
    links = page_links(response)
    assert time.process_time() - started < 2  # Python's re takes far longer than this on the same link
    assert [link.url for link in links] == ["http://a.example.com/keep"]
    bad = HtmlResponse("http://a.example.com/", body=body, request=Request("http://a.example.com/",
                       meta={"allow_regex": ["(a)\\1"]}))  # fmt: skip
    assert page_links(bad) == []
