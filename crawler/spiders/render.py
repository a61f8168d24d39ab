"""The `render` spider: the link spider's crawl, with each page loaded in headless Chromium.

Pages are fetched by `crawler.rendering.RenderDownloadHandler`, so the body of the page message
is the rendered DOM and its links are the links of that DOM (the same extractor and crawl filters
as `link`). A crawl goes to it with `"spiderid": "render"`; it waits for `attrs.wait_for` (a CSS
selector) when the request gives one. Its concurrency is RENDER_MAX_PAGES, not CONCURRENT_REQUESTS:
a browser page costs tens of MiB where a plain download costs kilobytes.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings

from crawler.spiders.link import LinkSpider

HANDLER = "crawler.rendering.RenderDownloadHandler"
LEASED_PER_TAB = 2  # requests in flight per browser tab: one rendering, one waiting for it


class RenderSpider(LinkSpider):
    name = "render"

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        shoal = settings["SHOAL"]
        pages = shoal.get_int("RENDER_MAX_PAGES")
        settings.set("DOWNLOAD_HANDLERS", {"http": HANDLER, "https": HANDLER}, "spider")
        # The add-on hands Shoal's CONCURRENT_REQUESTS to Scrapy (a spider may not set it): the
        # render spider's concurrency is its open-page limit, so it changes Shoal's own value.
        leased = LEASED_PER_TAB * pages  # the handler renders `pages` of them at a time
        changed = shoal.copy_with(CONCURRENT_REQUESTS=leased, CONCURRENT_REQUESTS_PER_DOMAIN=leased)
        settings.set("SHOAL", changed, settings.getpriority("SHOAL") or "project")
