"""Wires Shoal into Scrapy: the Shoal settings object becomes Scrapy's components and settings.

There is no hand-kept Scrapy settings.py: the runner passes Shoal's `Settings` as the Scrapy
setting `SHOAL`, and this add-on derives everything Scrapy needs from it. Users' own Scrapy
settings (SCRAPY_SETTINGS_MODULE, then SCRAPY_SETTINGS) are merged on top: their pipelines and
middlewares join Shoal's, but Shoal's components keep their places and Shoal's own settings are
set through Shoal (a clear start-up error names the one a user tried to change).
"""

from __future__ import annotations

import importlib
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES

from utils.config.errors import ConfigError

# Shoal settings handed to Scrapy under the same name.
PASSED_THROUGH = (
    "CONCURRENT_REQUESTS",
    "CONCURRENT_REQUESTS_PER_DOMAIN",
    "DOWNLOAD_TIMEOUT",
    "DOWNLOAD_DELAY",
    "RETRY_TIMES",
    "ROBOTSTXT_OBEY",
    "USER_AGENT",
    "DNSCACHE_ENABLED",
)

# Shoal's components in Scrapy's component dicts; `None` switches a Scrapy default off for good.
COMPONENTS: dict[str, dict[str, int | None]] = {
    "ITEM_PIPELINES": {},  # Shoal's Kafka pipeline is the item processor's, after every user pipeline
    "DOWNLOADER_MIDDLEWARES": {
        "crawler.guards.AddressPolicyMiddleware": 50,  # first in, last out: sees every request
        "crawler.extraction.ExtractionMiddleware": 60,  # a crawl's `extract`: the last before the spider
        "crawler.robots.RobotsArchiveMiddleware": 560,  # robots.txt answers after redirects and decoding
        # Scrapy's redirect middlewares, keeping the answers they follow (the archive writes them)
        "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
        "crawler.redirects.ArchivedMetaRefreshMiddleware": 580,
        "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
        "crawler.redirects.ArchivedRedirectMiddleware": 600,
        "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,  # retries go through Redis
        "crawler.downloader.RetryStatusMiddleware": 550,
        "crawler.ladder.LadderMiddleware": 580,  # blocks and the domain's level (issue 33), before the pool
        "crawler.proxies.ProxyPoolMiddleware": 600,  # before HttpProxyMiddleware (750); bans before 550
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "crawler.downloader.PerRequestCookiesMiddleware": 700,
        "crawler.stats.StatusStatsMiddleware": 950,
        "crawler.downloader.FetchTimeMiddleware": 990,  # the last before the network
        "crawler.downloader.ResponseHeaderBoundMiddleware": 995,  # the first on a response's way back
    },
    "SPIDER_MIDDLEWARES": {
        "crawler.spider_output.ItemLedgerMiddleware": 5,  # outermost: sees what reaches the scraper
        "crawler.items_vanished.ItemsVanishedMiddleware": 8,  # a user spider's items gone (issue 33)
        "scrapy.spidermiddlewares.depth.DepthMiddleware": None,  # curdepth/maxdepth instead
        "crawler.middlewares.MetaPassthroughMiddleware": 100,
        "crawler.spider_output.FollowPolicyMiddleware": 110,  # before the passthrough fills depth in
        "crawler.guards.LinkPolicyMiddleware": 900,  # found links, before the scheduler
    },
    "EXTENSIONS": {"scrapy.extensions.remote_control.RemoteControl": None},  # no open control port
    "DOWNLOAD_HANDLERS": {},
}
# Scrapy components Shoal runs as subclasses of its own: a user who switches Scrapy's off (None)
# switches Shoal's off with it, so REDIRECT_ENABLED and the component dict both still work.
SUBCLASSED = {
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": "crawler.redirects.ArchivedRedirectMiddleware",
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": "crawler.redirects.ArchivedMetaRefreshMiddleware",
}

# Scrapy settings Shoal decides; users change them through Shoal (or not at all).
FIXED = {
    "SCHEDULER": "crawler.scheduler.DistributedScheduler",
    "ITEM_PROCESSOR": "crawler.processor.ShoalItemProcessor",
    "HTTPERROR_ALLOW_ALL": True,  # every status becomes a page message
}
# Outputs of one response processed at once. Scrapy's asyncio scraper starts this many worker tasks
# for every response (scrapy/utils/asyncio.py `_parallel_asyncio`); its default of 100, for a page
# yielding ~9 requests and items, cost 635 us of CPU per page against 99 us at 16 (issue 37: 24 % of
# the crawler's profile). A page's items still wait for the broker 16 at a time. Users may set it.
CONCURRENT_ITEMS = 16
NOT_SETTABLE = {"SHOAL", "ADDONS", "SPIDER_MODULES", "SPIDER_LOADER_CLASS"}


class ShoalAddon:
    """Scrapy add-on: scheduler, pipeline, middlewares and limits from Shoal's settings."""

    def update_settings(self, settings: Any) -> None:
        shoal = settings["SHOAL"]
        user = user_scrapy_settings(shoal)
        # A spider's custom_settings (applied before add-ons, at a higher priority) obey the same rules.
        for name, attribute in list(settings.attributes.items()):
            if attribute.priority >= SETTINGS_PRIORITIES["spider"]:
                value = attribute.value
                value = value.copy_to_dict() if hasattr(value, "copy_to_dict") else value  # a component dict
                user[name] = {**user.get(name, {}), **value} if name in COMPONENTS and isinstance(value, dict) \
                    else value  # fmt: skip
        check_user_settings(user)

        def put(name: str, value: Any) -> None:  # wins over custom_settings too (checked above)
            settings.set(name, value, max(SETTINGS_PRIORITIES["addon"], settings.getpriority(name) or 0))

        for name, value in FIXED.items():
            put(name, value)
        for name, ours in COMPONENTS.items():
            theirs = user.pop(name, {})
            switched_off = {SUBCLASSED[path]: None for path, order in theirs.items() if path in SUBCLASSED
                            and order is None}  # fmt: skip
            put(name, {**settings.getdict(name), **theirs, **ours, **switched_off})
        for name in PASSED_THROUGH:
            put(name, shoal[name])
        _set_limits(put, shoal)
        # Only http(s) is fetched: a file:// (or ftp, s3, data) URL that slipped past the schemas
        # must not put local files (/proc/self/environ: keys, passwords) on the firehose.
        never = dict.fromkeys(("file", "ftp", "s3", "data"))
        put("DOWNLOAD_HANDLERS", {**settings.getdict("DOWNLOAD_HANDLERS"), **never})
        put("TELNETCONSOLE_ENABLED", False)
        put("LOG_LEVEL", shoal["LOG_LEVEL"])
        put("LOGSTATS_INTERVAL", 60.0)
        put("REACTOR_THREADPOOL_MAXSIZE", 4)
        put("CONCURRENT_ITEMS", CONCURRENT_ITEMS)
        for name, value in user.items():
            put(name, value)


def user_scrapy_settings(shoal: Any) -> dict[str, Any]:
    """SCRAPY_SETTINGS_MODULE's UPPERCASE names, then SCRAPY_SETTINGS over them (component dicts merged)."""
    merged: dict[str, Any] = {}
    module_name = shoal.get_str("SCRAPY_SETTINGS_MODULE")
    if module_name:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(f"SCRAPY_SETTINGS_MODULE: cannot import {module_name}: {exc!r}") from None
        merged.update((k, v) for k, v in vars(module).items() if k.isupper())
    for name, value in shoal.get_dict("SCRAPY_SETTINGS").items():
        if name in COMPONENTS and isinstance(merged.get(name), dict) and isinstance(value, dict):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = value
    return merged


def check_user_settings(user: dict[str, Any]) -> None:
    """Every way the user's Scrapy settings would break Shoal, in one ConfigError."""
    problems = []
    for name, value in user.items():
        if name in PASSED_THROUGH:
            problems.append(f"{name} is a Shoal setting: set it as {name} (settings file, SHOAL_{name} or -s)")
        elif name in FIXED or name in NOT_SETTABLE:
            problems.append(f"{name} is Shoal's and cannot be set in SCRAPY_SETTINGS")
        elif name in COMPONENTS:
            if not isinstance(value, dict):
                problems.append(f"{name} must be a dict of component path -> order")
                continue
            for path, order in value.items():
                ours = COMPONENTS[name]
                if path in ours and order != ours[path]:
                    what = "switched off by Shoal" if ours[path] is None else f"Shoal's, at {ours[path]}"
                    problems.append(f"{name}: {path} is {what}; it cannot be moved, switched on or off")
    if problems:
        raise ConfigError("SCRAPY_SETTINGS: " + "; ".join(problems))


def download_maxsize(shoal: Any) -> int:
    """DOWNLOAD_MAXSIZE, or what one page message can carry: a larger body would be sent without it
    anyway (crawler/pipelines.py), so it is never worth holding in memory. Bounds decompressed size
    too (Scrapy >= 2.11.1 applies it to gzip, deflate, br and zstd bodies)."""
    size = int(shoal.get_int("DOWNLOAD_MAXSIZE"))
    if size:
        return size
    carried = int(shoal.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE"))
    return carried * 3 // 4 if shoal.get_bool("KAFKA_BASE_64_ENCODE") else carried


def _set_limits(put: Any, shoal: Any) -> None:
    """Body size, warning size and URL length limits from Shoal's settings (docs/reference/security.md)."""
    maxsize = download_maxsize(shoal)
    put("DOWNLOAD_MAXSIZE", maxsize)
    put("DOWNLOAD_WARNSIZE", shoal.get_int("DOWNLOAD_WARNSIZE") or maxsize // 2)
    put("URLLENGTH_LIMIT", shoal.get_int("URL_LENGTH_MAX"))
