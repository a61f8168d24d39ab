"""User spiders without sockets: the registry, the skeleton, the add-on's merge and its guards,
the item message, the ledger that holds a lease for its items, and the follow policy (issue 18)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest
from scrapy import Field, Item, Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings as ScrapySettings

from crawler.addon import ShoalAddon
from crawler.conversion import UnstorableRequest, new_request, request_from_lease
from crawler.items import ItemLedger, item_message
from crawler.registry import SpiderRegistryError, discover, spider_class
from crawler.spider_output import crawl_filters_allow
from crawler.spiders import ShoalSpider
from utils.cli.new_spider import new_spider_command
from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.frontier import Lease, crawl_request


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("usersp_")]:
        del sys.modules[name]


def write(directory: Path, name: str, text: str) -> None:
    (directory / f"{name}.py").write_text(textwrap.dedent(text))


def settings(**values: object) -> Settings:
    return Settings.load(overrides={k: v for k, v in values.items()}, environ={})


def test_spider_modules_add_spiders_beside_the_built_in_ones_and_the_installed_example(module_dir: Path) -> None:
    write(module_dir, "usersp_a", """
        from crawler.spiders import ShoalSpider
        class Mine(ShoalSpider):
            name = "mine"
    """)
    found = discover(settings(SPIDER_MODULES=["usersp_a"]))
    assert found["mine"].origin == "SPIDER_MODULES: usersp_a"
    assert found["link"].origin == "built-in"
    assert found["shop"].origin == "entry point shop (shoal-shop-example)"  # examples/shop, `make install`
    assert spider_class(settings(SPIDER_MODULES=["usersp_a"]), "mine").__name__ == "Mine"


def test_every_registry_problem_is_reported_at_once(module_dir: Path) -> None:
    write(module_dir, "usersp_clash", """
        from crawler.spiders import ShoalSpider
        class Mine(ShoalSpider):
            name = "link"
    """)
    write(module_dir, "usersp_plain", """
        from scrapy import Spider
        class Plain(Spider):
            name = "plain"
    """)
    write(module_dir, "usersp_broken", "import not_installed_anywhere\n")
    with pytest.raises(SpiderRegistryError) as raised:
        discover(settings(SPIDER_MODULES=["usersp_clash", "usersp_plain", "usersp_broken"]))
    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert "spider name 'link' is defined twice: crawler.spiders.link.LinkSpider (built-in)" in lines[0]
    assert "must subclass crawler.spiders.ShoalSpider" in lines[1]
    assert lines[2] == ("SPIDER_MODULES: usersp_broken: cannot import: "
                        "ModuleNotFoundError: No module named 'not_installed_anywhere'")  # fmt: skip


def test_an_unknown_spider_names_the_known_ones() -> None:
    with pytest.raises(SpiderRegistryError, match="unknown spider 'nope'; known: link, render, shop, wandering"):
        spider_class(settings(), "nope")


def test_new_spider_writes_a_skeleton_the_registry_loads_and_never_overwrites(module_dir: Path) -> None:
    args = argparse.Namespace(name="usersp_new", dir=str(module_dir))
    assert new_spider_command(settings(), args) == 0
    cls = spider_class(settings(SPIDER_MODULES=["usersp_new"]), "usersp_new")
    assert issubclass(cls, ShoalSpider)
    response = HtmlResponse("http://127.18.0.1/a", body=b"<title>T</title><a href='/b'>b</a>", encoding="utf-8",
                            request=Request("http://127.18.0.1/a"))  # fmt: skip
    out = list(cls().parse(response))
    assert dataclasses.asdict(out[0]) == {"url": "http://127.18.0.1/a", "title": "T"}
    assert out[1].url == "http://127.18.0.1/b"
    assert new_spider_command(settings(), args) == 1  # exists
    assert new_spider_command(settings(), argparse.Namespace(name="Bad-Name", dir=str(module_dir))) == 2


def scrapy_settings(shoal: Settings, **custom: object) -> ScrapySettings:
    result = ScrapySettings({"SHOAL": shoal})
    result.setdict(custom, priority="spider")
    ShoalAddon().update_settings(result)
    return result


def test_users_components_join_shoals_which_keep_their_places() -> None:
    shoal = settings(SCRAPY_SETTINGS={"ITEM_PIPELINES": {"my.Pipeline": 300},
                                      "DOWNLOADER_MIDDLEWARES": {"my.Downloader": 543},
                                      "DOWNLOAD_HANDLERS": {"https": "my.Handler"}, "MY_OWN_SETTING": 7})  # fmt: skip
    result = scrapy_settings(shoal, SPIDER_MIDDLEWARES={"my.SpiderMw": 200})
    assert result.getdict("ITEM_PIPELINES") == {"my.Pipeline": 300}
    assert result.getdict("DOWNLOADER_MIDDLEWARES")["my.Downloader"] == 543
    assert result.getdict("DOWNLOADER_MIDDLEWARES")["crawler.proxies.ProxyPoolMiddleware"] == 600
    spider_mws = result.getdict("SPIDER_MIDDLEWARES")
    assert spider_mws["my.SpiderMw"] == 200
    assert spider_mws["crawler.spider_output.ItemLedgerMiddleware"] == 5
    never = dict.fromkeys(("file", "ftp", "s3", "data"))  # Shoal fetches http(s) only
    assert result.getdict("DOWNLOAD_HANDLERS") == {"https": "my.Handler", **never}
    assert result["MY_OWN_SETTING"] == 7
    assert result["ITEM_PROCESSOR"] == "crawler.processor.ShoalItemProcessor"
    assert result["SCHEDULER"] == "crawler.scheduler.DistributedScheduler"


def test_switching_off_scrapys_redirect_middlewares_switches_off_shoals_subclasses() -> None:
    off = {"scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
           "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None}  # fmt: skip
    for result in (scrapy_settings(settings(SCRAPY_SETTINGS={"DOWNLOADER_MIDDLEWARES": off})),
                   scrapy_settings(settings(), DOWNLOADER_MIDDLEWARES=off)):  # fmt: skip
        middlewares = result.getdict("DOWNLOADER_MIDDLEWARES")
        assert middlewares["crawler.redirects.ArchivedRedirectMiddleware"] is None
        assert middlewares["crawler.redirects.ArchivedMetaRefreshMiddleware"] is None
    default = scrapy_settings(settings()).getdict("DOWNLOADER_MIDDLEWARES")
    assert default["crawler.redirects.ArchivedRedirectMiddleware"] == 600


def test_few_item_workers_per_response_unless_the_user_sets_them() -> None:
    # Scrapy starts CONCURRENT_ITEMS tasks per response; 100 cost ~0.5 ms a page (issue 37)
    assert scrapy_settings(settings()).getint("CONCURRENT_ITEMS") == 16
    assert scrapy_settings(settings(SCRAPY_SETTINGS={"CONCURRENT_ITEMS": 50})).getint("CONCURRENT_ITEMS") == 50
    assert scrapy_settings(settings(), CONCURRENT_ITEMS=40).getint("CONCURRENT_ITEMS") == 40


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"DOWNLOADER_MIDDLEWARES": {"crawler.proxies.ProxyPoolMiddleware": None}},
         "DOWNLOADER_MIDDLEWARES: crawler.proxies.ProxyPoolMiddleware is Shoal's, at 600"),
        ({"SPIDER_MIDDLEWARES": {"scrapy.spidermiddlewares.depth.DepthMiddleware": 900}},
         "DepthMiddleware is switched off by Shoal"),
        ({"SCHEDULER": "my.Scheduler"}, "SCHEDULER is Shoal's and cannot be set"),
        ({"ITEM_PROCESSOR": "my.Processor"}, "ITEM_PROCESSOR is Shoal's"),
        ({"CONCURRENT_REQUESTS": 64}, "CONCURRENT_REQUESTS is a Shoal setting: set it as CONCURRENT_REQUESTS"),
    ],
)  # fmt: skip
def test_shoals_components_and_settings_cannot_be_changed_by_accident(user: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        scrapy_settings(settings(SCRAPY_SETTINGS=user))
    with pytest.raises(ConfigError, match=message):  # a spider's custom_settings obey the same rules
        scrapy_settings(settings(), **user)


def test_a_scrapy_settings_module_is_merged_under_scrapy_settings(module_dir: Path) -> None:
    write(module_dir, "usersp_settings", """
        ITEM_PIPELINES = {"a.P": 100}
        DOWNLOAD_MAXSIZE = 1000
        lower_case_is_ignored = 1
    """)
    shoal = settings(SCRAPY_SETTINGS_MODULE="usersp_settings", SCRAPY_SETTINGS={"ITEM_PIPELINES": {"b.P": 200}})
    result = scrapy_settings(shoal)
    assert result.getdict("ITEM_PIPELINES") == {"a.P": 100, "b.P": 200}
    assert result["DOWNLOAD_MAXSIZE"] == 1000
    with pytest.raises(ConfigError, match="SCRAPY_SETTINGS_MODULE: cannot import usersp_missing"):
        scrapy_settings(settings(SCRAPY_SETTINGS_MODULE="usersp_missing"))


class Card(Item):
    name = Field()
    price = Field()


def test_the_item_message_carries_the_crawl_and_the_item_under_its_own_key() -> None:
    request = Request("http://127.18.0.1/p/1", meta={"appid": "a", "crawlid": "c", "spiderid": "shop",
                                                     "request_id": "r1"})  # fmt: skip
    response = HtmlResponse("http://127.18.0.1/p/1", body=b"", request=request)
    message = item_message(Card(name="kettle", price=9.5), response)
    assert {k: v for k, v in message.items() if k != "timestamp"} == {
        "appid": "a", "crawlid": "c", "spiderid": "shop", "url": "http://127.18.0.1/p/1", "request_id": "r1",
        "item_type": "Card", "item": {"name": "kettle", "price": 9.5},
    }  # fmt: skip
    keyed = item_message(Card(name="kettle", price=9.5), response, "name")
    assert keyed["item_key"] == "name"  # the spider's item_key names the record's identifying field


def test_the_ledger_settles_a_page_only_after_its_last_item_and_reports_errors_and_losses() -> None:
    ledger = ItemLedger()
    outcomes: list[tuple] = []
    ledger.when_done("none", lambda error, lost: outcomes.append(("none", error, lost)))
    assert outcomes == [("none", None, False)]  # no items: at once
    ledger.expect("p")
    ledger.expect("p")
    ledger.done("p")
    ledger.when_done("p", lambda error, lost: outcomes.append(("p", error, lost)))
    assert len(outcomes) == 1  # one item still in flight
    ledger.fail("p", "KeyError: 'price'")
    ledger.done("p")
    assert outcomes[-1] == ("p", "KeyError: 'price'", False)
    ledger.expect("q")
    ledger.done("q", lost=True)
    ledger.when_done("q", lambda error, lost: outcomes.append(("q", error, lost)))
    assert outcomes[-1] == ("q", None, True)
    assert ledger.pages == {}


@pytest.mark.parametrize(
    ("meta", "url", "allowed"),
    [
        ({}, "http://x.example/a.pdf", True),
        ({"allowed_domains": ["example.com"]}, "http://shop.example.com/a", True),
        ({"allowed_domains": ["example.com"]}, "http://example.org/a", False),
        ({"allow_regex": ["/product/"]}, "http://h/product/1", True),
        ({"allow_regex": ["/product/"], "deny_regex": ["/1$"]}, "http://h/product/1", False),
        ({"deny_extensions": ["pdf"]}, "http://h/a.PDF", False),
    ],
)
def test_user_spiders_requests_obey_the_crawls_filters(meta: dict, url: str, allowed: bool) -> None:
    assert crawl_filters_allow(meta, url) is allowed


class Kwargs(ShoalSpider):
    name = "kwargs"

    def parse_product(self, response: HtmlResponse, category: str, rank: int) -> None:
        """A callback with cb_kwargs."""


def test_a_callback_and_its_cb_kwargs_travel_through_the_frontier_and_unstorable_ones_are_refused() -> None:
    spider = Kwargs()
    request = Request("http://127.18.0.1/p/1", callback=spider.parse_product, cb_kwargs={"category": "tea", "rank": 2},
                      meta={"appid": "a", "crawlid": "c"})  # fmt: skip
    entry = new_request(request, spider)
    assert entry is not None
    record = crawl_request.restore(entry.payload, entry.profile, "kwargs", "a", "c", "0" * 16)
    lease = Lease(spiderid="kwargs", domain="127.18.0.1", request_id="0" * 16, record=record)
    again = request_from_lease(lease, spider)
    assert again.callback == spider.parse_product
    assert again.cb_kwargs == {"category": "tea", "rank": 2}
    with pytest.raises(UnstorableRequest, match="cb_kwargs and meta must be JSON values"):
        new_request(Request("http://127.18.0.1/p/2", cb_kwargs={"when": object()}, meta={"appid": "a"}), spider)


def test_the_users_spider_middlewares_are_not_loaded_for_the_built_in_spiders() -> None:
    from scrapy.crawler import Crawler
    from scrapy.exceptions import NotConfigured

    from crawler.spider_output import ItemLedgerMiddleware
    from crawler.spiders.link import LinkSpider

    with pytest.raises(NotConfigured):
        ItemLedgerMiddleware.from_crawler(Crawler(LinkSpider))
    assert isinstance(ItemLedgerMiddleware.from_crawler(Crawler(Kwargs)), ItemLedgerMiddleware)


def test_shoal_spiders_lists_each_spider_with_its_origin_and_shoal_crawl_refuses_unknown_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from crawler.main import main as crawl_main
    from crawler.registry import spiders_command

    assert spiders_command(settings(), argparse.Namespace()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["link", "render", "shop", "wandering"]
    assert lines[2].split()[1:] == ["shoal_shop.spiders.ShopSpider", "[entry", "point", "shop", "(shoal-shop-example)]"]
    assert crawl_main(settings(), argparse.Namespace(spider="nope")) == 2  # before waiting for any service
    assert "shoal crawl: unknown spider 'nope'" in capsys.readouterr().err
