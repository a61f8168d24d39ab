"""Wires Shoal into Scrapy: the Shoal settings object becomes Scrapy's components and settings.

There is no hand-kept Scrapy settings.py: the runner passes Shoal's `Settings` as the Scrapy
setting `SHOAL`, and this add-on derives everything Scrapy needs from it.
"""

from __future__ import annotations

from typing import Any

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


class ShoalAddon:
    """Scrapy add-on: scheduler, pipeline, middlewares and limits from Shoal's settings."""

    def update_settings(self, settings: Any) -> None:
        shoal = settings["SHOAL"]
        settings.set("SCHEDULER", "crawler.scheduler.DistributedScheduler", "addon")
        settings.set("ITEM_PIPELINES", {"crawler.pipelines.KafkaPipeline": 100}, "addon")
        settings.set(
            "DOWNLOADER_MIDDLEWARES",
            {
                "crawler.guards.AddressPolicyMiddleware": 50,  # first in, last out: sees every request
                "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,  # retries go through Redis
                "crawler.downloader.RetryStatusMiddleware": 550,
                "crawler.proxies.ProxyPoolMiddleware": 600,  # before HttpProxyMiddleware (750); bans before 550
                "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
                "crawler.downloader.PerRequestCookiesMiddleware": 700,
                "crawler.stats.StatusStatsMiddleware": 950,
                "crawler.downloader.FetchTimeMiddleware": 990,  # the last before the network
            },
            "addon",
        )
        settings.set(
            "SPIDER_MIDDLEWARES",
            {
                "scrapy.spidermiddlewares.depth.DepthMiddleware": None,  # curdepth/maxdepth instead
                "crawler.middlewares.MetaPassthroughMiddleware": 100,
                "crawler.guards.LinkPolicyMiddleware": 900,  # found links, before the scheduler
            },
            "addon",
        )
        for name in PASSED_THROUGH:
            settings.set(name, shoal[name], "addon")
        _set_limits(settings, shoal)
        settings.set("HTTPERROR_ALLOW_ALL", True, "addon")  # every status becomes a page message
        settings.set("TELNETCONSOLE_ENABLED", False, "addon")
        extensions = dict(settings.getdict("EXTENSIONS"))
        extensions["scrapy.extensions.remote_control.RemoteControl"] = None  # no open control port
        settings.set("EXTENSIONS", extensions, "addon")
        settings.set("LOG_LEVEL", shoal["LOG_LEVEL"], "addon")
        settings.set("LOGSTATS_INTERVAL", 60.0, "addon")
        settings.set("REACTOR_THREADPOOL_MAXSIZE", 4, "addon")


def download_maxsize(shoal: Any) -> int:
    """DOWNLOAD_MAXSIZE, or what one page message can carry: a larger body would be sent without it
    anyway (crawler/pipelines.py), so it is never worth holding in memory. Bounds decompressed size
    too (Scrapy >= 2.11.1 applies it to gzip, deflate, br and zstd bodies)."""
    size = int(shoal.get_int("DOWNLOAD_MAXSIZE"))
    if size:
        return size
    carried = int(shoal.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE"))
    return carried * 3 // 4 if shoal.get_bool("KAFKA_BASE_64_ENCODE") else carried


def _set_limits(settings: Any, shoal: Any) -> None:
    """Body size, warning size and URL length limits from Shoal's settings (README "Security")."""
    maxsize = download_maxsize(shoal)
    settings.set("DOWNLOAD_MAXSIZE", maxsize, "addon")
    settings.set("DOWNLOAD_WARNSIZE", shoal.get_int("DOWNLOAD_WARNSIZE") or maxsize // 2, "addon")
    settings.set("URLLENGTH_LIMIT", shoal.get_int("URL_LENGTH_MAX"), "addon")
