"""The crawl schema: Scrapy Cluster's fields, limits and defaults, plus Shoal's additions."""

from __future__ import annotations

import pytest

from utils import schemas
from utils.config.errors import InvalidMessage

BASE = {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "abc123"}


def test_defaults_are_filled_as_scrapy_cluster_does() -> None:
    filled = schemas.validate("crawl", {**BASE, "maxdepth": 2, "priority": 90})
    assert filled == {
        **BASE, "maxdepth": 2, "priority": 90, "spiderid": "link", "domain_max_pages": None,
        "allowed_domains": None, "allow_regex": None, "deny_regex": None, "deny_extensions": None,
        "expires": 0, "useragent": None, "cookie": None, "attrs": None,
        "method": "GET", "headers": None, "body": None, "proxy": None, "dont_filter": False,
    }  # fmt: skip


def test_validation_does_not_change_the_callers_message() -> None:
    message = dict(BASE)
    schemas.validate("crawl", message)
    assert message == BASE


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"appid": "ab"}, "appid"),
        ({"priority": 101}, "priority"),
        ({"priority": True}, "priority"),
        ({"maxdepth": -1}, "maxdepth"),
        ({"unknown": 1}, "unknown"),
        ({"useragent": "x"}, "useragent"),
        ({"allowed_domains": ["a.com", "a.com"]}, "allowed_domains"),
        ({"proxy": "ftp://p:1"}, "proxy"),
        ({"method": "FETCH"}, "method"),
    ],
)
def test_invalid_fields_are_named_in_the_cause(change: dict, cause: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        schemas.validate("crawl", {**BASE, **change})
    assert cause in (info.value.cause or "")


def test_missing_required_fields_are_refused() -> None:
    for field in ("url", "appid", "crawlid"):
        with pytest.raises(InvalidMessage):
            schemas.validate("crawl", {k: v for k, v in BASE.items() if k != field})
