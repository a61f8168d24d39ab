"""Block detection (issue 33): the detector's signs on real Scrapy responses, and the domain
config's `blocks` entry validated (RE2 markers, levels that exist, thresholds >= 1)."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse, Response

from crawler.blocks import BlockDetector, Detection
from utils.frontier.block_config import LadderRules
from utils.frontier.domain_config import DomainConfig
from utils.frontier.zookeeper import ConfigWatcher

PAGE = b"<html><body>" + b"<p>stock</p>" * 200 + b'<a href="/a">a</a><a href="/b">b</a></body></html>'


def detector() -> BlockDetector:
    return BlockDetector(frozenset({403, 429, 503}), ("Access denied by",), 0.1, 3)


def page(body: bytes = PAGE, status: int = 200, **headers: str) -> Response:
    return HtmlResponse("http://shop.test/p", status=status, body=body, headers=headers or None)


def test_statuses_are_blocks_and_keep_the_retry_after() -> None:
    found = detector().detect(page(status=429, **{"Retry-After": "7"}), "shop.test")
    assert found == Detection("status_429", "Retry-After: 7")
    assert detector().detect(page(status=403), "shop.test") == Detection("status_403")
    assert detector().detect(page(status=404), "shop.test") is None


def test_markers_of_the_settings_and_of_the_domain() -> None:
    captcha = b"<html><div class='g-recaptcha'></div></html>"
    assert detector().detect(page(captcha), "shop.test") is None
    assert detector().detect(page(captcha), "shop.test", ("g-recaptcha",)) == Detection("marker")
    assert detector().detect(page(b"Access denied by policy"), "shop.test") == Detection("marker")


def test_a_page_much_smaller_than_the_domains_usual_is_a_block_once_the_size_is_known() -> None:
    d = detector()
    assert d.detect(page(b"<html>tiny</html>"), "shop.test") is None  # nothing known yet: joins the mean
    for _ in range(5):
        assert d.detect(page(), "shop.test") is None
    found = d.detect(page(b"<html><a href='/x'>x</a></html>"), "shop.test")
    assert found is not None
    assert found.reason == "small_page"
    assert d.detect(page(b"<html><a href='/x'>x</a></html>"), "other.test") is None  # per domain


def test_links_that_vanish_are_a_block() -> None:
    d = detector()
    for _ in range(4):
        d.detect(page(), "shop.test")
    found = d.detect(page(PAGE.replace(b"<a ", b"<b ")), "shop.test")
    assert found is not None
    assert found.reason == "links_vanished"


def test_a_subclass_adds_its_own_sign() -> None:
    class EmptyTitle(BlockDetector):
        def detect(self, response: Response, domain: str, markers: tuple[str, ...] = ()) -> Detection | None:
            found = super().detect(response, domain, markers)
            return found or (Detection("no_title") if b"<title>" not in response.body else None)

    d = EmptyTitle(frozenset({429}), (), 0.1, 3)
    assert d.detect(page(), "shop.test") == Detection("no_title")
    assert d.detect(page(status=429), "shop.test") == Detection("status_429")


def test_ladder_rules_skip_rungs_the_domain_does_not_use() -> None:
    rules = DomainConfig.parse("domains: {shop.test: {blocks: {levels: [1, 4], up_after: 2}}}") \
        .domain_blocks("www.shop.test").rules  # fmt: skip
    assert rules == LadderRules((0, 1, 4), 2, 60.0, 20)
    assert [rules.up(0), rules.up(1), rules.up(4), rules.down(4), rules.down(1), rules.down(0)] == [1, 4, 4, 1, 0, 0]


def test_a_domains_ladder_takes_what_its_entry_does_not_set_from_the_settings() -> None:
    config = DomainConfig.parse("domains: {shop.test: {blocks: {levels: [0, 3], up_after: 2}}}")
    blocks = config.domain_blocks("shop.test")
    settings = LadderRules((0, 1, 2, 3, 4), up_after=5, window=30.0, down_after=4)  # LADDER_* as set
    assert blocks.rules_over(settings) == LadderRules((0, 3), up_after=2, window=30.0, down_after=4)
    markers_only = DomainConfig.parse("domains: {shop.test: {blocks: {markers: [x]}}}").domain_blocks("shop.test")
    assert markers_only.rules_over(settings) == settings


@pytest.mark.parametrize(("blocks", "refused"), [
    ("{markers: ['(?<=x)y']}", "markers"),  # lookbehind: RE2 refuses it
    ("{markers: ['(unclosed']}", "markers"),
    ("{levels: [0, 5]}", "not a level"),
    ("{level: 9}", "not a level"),
    ("{up_after: -1}", "up_after"),
    ("{down_after: 0}", "down_after"),
    ("{window: -5}", "window"),
    ("{speed: 2}", "unknown fields"),
])  # fmt: skip
def test_bad_blocks_config_is_refused(blocks: str, refused: str) -> None:
    with pytest.raises(ValueError, match=refused):
        DomainConfig.parse(f"domains: {{shop.test: {{blocks: {blocks}}}}}")


def test_the_watcher_keeps_the_last_good_config_when_a_bad_one_arrives() -> None:
    applied: list[DomainConfig] = []
    watcher = ConfigWatcher(None, "/shoal/config", applied.append)  # type: ignore[arg-type]  # _read needs no client
    watcher._read(b"domains: {shop.test: {blocks: {markers: [captcha], level: 2}}}")
    watcher._read(b"domains: {shop.test: {blocks: {markers: ['(?=captcha)'], level: 2}}}")
    watcher._read(b"domains: {shop.test: {blocks: {levels: [0, 1, 7]}}}")
    watcher._read(b"domains: {shop.test: {blocks: {up_after: -3}}}")
    assert len(applied) == 1
    blocks = applied[0].domain_blocks("shop.test")
    assert blocks is not None
    assert blocks.markers == ("captcha",)
    assert blocks.pinned == 2
