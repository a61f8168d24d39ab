"""Quotas per app (the YAML node), keys' principals and scopes, and what a key may send to /feed."""

from __future__ import annotations

import pytest

from rest.envelope import ApiError
from rest.feed_access import check_access, needed_scope
from utils.apps.api_keys import ADMIN, Principal, check_scopes
from utils.apps.quotas import AppQuota, Quotas, changed
from utils.apps.usage import AppFigures


def test_an_apps_own_entry_replaces_the_default_whole() -> None:
    quotas = Quotas.parse(b"default: {max_queued: 100}\napps:\n  news: {max_queued: 5}\n  research: {}\n")
    assert quotas.of("news") == AppQuota(max_queued=5)
    assert quotas.of("research") == AppQuota()  # its own entry: no quota, whatever the default says
    assert quotas.of("price") == AppQuota(max_queued=100)
    assert Quotas.parse(quotas.to_yaml()) == quotas


def test_lease_quotas_and_weight_are_read_and_the_weight_falls_back_to_the_default() -> None:
    quotas = Quotas.parse("default: {weight: 0.5}\napps:\n  news: {max_inflight: 3, pages_per_minute: 60, weight: 4}\n"
                          "  research: {max_queued: 7}\n")  # fmt: skip
    assert quotas.of("news") == AppQuota(max_inflight=3, pages_per_minute=60, weight=4.0)
    assert (quotas.weight_of("news"), quotas.weight_of("research"), quotas.weight_of("other")) == (4.0, 0.5, 0.5)
    assert Quotas.parse(quotas.to_yaml()) == quotas
    figures = AppFigures("news", inflight=3, pages_per_sec=0.5)
    figures.set_quota(quotas.of("news"))
    assert figures.quota_use == {"max_inflight": 1.0, "pages_per_minute": 0.5}


@pytest.mark.parametrize("text", [
    "apps: {news: {max_queue: 5}}",  # misspelt: refused, never silently ignored
    "apps: {news: {weight: 0}}",
    "apps: {news: {weight: 1000}}",
    "apps: {news: {weight: yes}}",
    "apps: {news: {max_inflight: 1.5}}",
    "apps: {news: {max_queued: -1}}",
    "apps: {news: {max_queued: 1.5}}",
    "apps: {news: {max_queued: true}}",
    "apps: [news]",
    "limits: {}",
    "apps: {news: 5}",
    "{",
])  # fmt: skip
def test_a_malformed_quota_node_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="quota"):
        Quotas.parse(text)


def test_an_empty_node_is_no_quota() -> None:
    assert Quotas.parse(None).empty
    assert Quotas.parse(b"").empty
    assert Quotas.parse("").of("any").limited is False


def test_changed_sets_unsets_and_removes_one_app() -> None:
    quotas = changed(Quotas(), "news", {"max_queued": 10})
    assert quotas.of("news").max_queued == 10
    assert changed(quotas, "news", {"max_queued": None}).of("news") == AppQuota()
    assert "news" not in changed(quotas, "news", {}, remove=True).apps
    assert changed(quotas, "default", {"max_queued": 3}).of("other").max_queued == 3


def test_quota_use_is_used_over_limit() -> None:
    figures = AppFigures("news", queued=50)
    figures.set_quota(AppQuota(max_queued=200))
    assert figures.quota_use == {"max_queued": 0.25}
    assert figures.quota == {"max_queued": 200}
    figures.set_quota(AppQuota())
    assert (figures.quota, figures.quota_use) == ({}, {})


def test_an_apps_key_sees_its_own_app_only_and_the_admin_every_app() -> None:
    news = Principal("news", check_scopes(["feed", "info"]))
    assert news.sees("news")
    assert not news.sees("price")
    assert news.allows("feed")
    assert not news.allows("stop")
    assert not news.allows("admin")
    assert ADMIN.sees("price")
    assert ADMIN.allows("stop")
    with pytest.raises(ValueError, match="scopes"):
        check_scopes(["feed", "delete"])
    with pytest.raises(ValueError, match="scopes"):
        check_scopes([""])


@pytest.mark.parametrize(("kind", "message", "scope"), [
    ("crawl", {}, "feed"), ("action", {"action": "info"}, "info"), ("action", {"action": "stop"}, "stop"),
    ("action", {"action": "purge-dead-letters"}, "stop"), ("stats", {}, "admin"), ("zookeeper", {}, "admin"),
])  # fmt: skip
def test_each_kind_of_request_needs_its_scope(kind: str, message: dict, scope: str) -> None:
    assert needed_scope(kind, message) == scope


def test_an_apps_key_feeds_its_own_app_only() -> None:
    news = Principal("news", check_scopes(["feed", "info", "stop"]))
    check_access(news, "crawl", {"appid": "news"})
    with pytest.raises(ApiError) as refused:
        check_access(news, "crawl", {"appid": "price"})
    assert refused.value.status_code == 403
    with pytest.raises(ApiError):
        check_access(news, "stats", {"appid": "news"})  # cluster-wide: the admin's
    check_access(ADMIN, "zookeeper", {"appid": "anyone"})
