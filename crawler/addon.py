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
                "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,  # retries go through Redis
                "crawler.downloader.RetryStatusMiddleware": 550,
                "crawler.proxies.ProxyPoolMiddleware": 600,  # before HttpProxyMiddleware (750); bans before 550
                "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
                "crawler.downloader.PerRequestCookiesMiddleware": 700,
                "crawler.stats.StatusStatsMiddleware": 950,
            },
            "addon",
        )
        settings.set(
            "SPIDER_MIDDLEWARES",
            {
                "scrapy.spidermiddlewares.depth.DepthMiddleware": None,  # curdepth/maxdepth instead
                "crawler.middlewares.MetaPassthroughMiddleware": 100,
            },
            "addon",
        )
        for name in PASSED_THROUGH:
            settings.set(name, shoal[name], "addon")
        settings.set("HTTPERROR_ALLOW_ALL", True, "addon")  # every status becomes a page message
        # Only http(s) is fetched: a file:// (or ftp, s3, data) URL that slipped past the schemas
        # must not put local files (/proc/self/environ: keys, passwords) on the firehose.
        settings.set("DOWNLOAD_HANDLERS", dict.fromkeys(("file", "ftp", "s3", "data")), "addon")
        settings.set("TELNETCONSOLE_ENABLED", False, "addon")
        extensions = dict(settings.getdict("EXTENSIONS"))
        extensions["scrapy.extensions.remote_control.RemoteControl"] = None  # no open control port
        settings.set("EXTENSIONS", extensions, "addon")
        settings.set("LOG_LEVEL", shoal["LOG_LEVEL"], "addon")
        settings.set("LOGSTATS_INTERVAL", 60.0, "addon")
        settings.set("REACTOR_THREADPOOL_MAXSIZE", 4, "addon")
