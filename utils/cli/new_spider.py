"""`shoal new-spider NAME`: a user spider's skeleton that runs as written (docs/how-to/own-spider.md)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from utils.config.settings import Settings

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

TEMPLATE = '''"""The `{name}` spider: {{describe what it crawls}}.

Run it on the cluster: put this module where Python finds it, list it in SPIDER_MODULES
(`-s SPIDER_MODULES={name}` or a settings file) and start `shoal crawl --spider {name}`; then feed
`{{"url": "http://...", "appid": "me", "crawlid": "c1", "spiderid": "{name}", "maxdepth": 2}}`.
Items arrive on `<prefix>.items`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from scrapy.http import Response

from crawler.spiders import ShoalSpider


@dataclass
class {cls}Item:
    url: str
    title: str | None


class {cls}Spider(ShoalSpider):
    name = "{name}"
    send_pages = False  # True: also send every page's raw message to <prefix>.crawled_firehose

    def parse(self, response: Response, **_: Any) -> Iterator[Any]:
        # response.meta has the crawl's appid, crawlid, attrs and curdepth.
        yield {cls}Item(url=response.url, title=response.css("title::text").get())
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)  # queued through the frontier
'''


def skeleton(name: str) -> str:
    """The module text of spider `name`."""
    cls = "".join(part.capitalize() for part in name.split("_"))
    return TEMPLATE.format(name=name, cls=cls)


def new_spider_command(settings: Settings, args: argparse.Namespace) -> int:
    if not _NAME.match(args.name):
        print(f"shoal new-spider: {args.name!r} is not a spider name (lowercase letters, digits, _)", file=sys.stderr)
        return 2
    path = Path(args.dir) / f"{args.name}.py"
    if path.exists():
        print(f"shoal new-spider: {path} exists; not overwritten", file=sys.stderr)
        return 1
    path.write_text(skeleton(args.name), encoding="utf-8")
    where = path.parent.resolve()
    run = f"PYTHONPATH={where} shoal -s SPIDER_MODULES={args.name} crawl --spider {args.name}"
    print(f"wrote {path}; run it with: {run}")
    return 0
