"""Users' items: their Kafka message, and the ledger that holds a page's lease until its items are in.

A user spider's callback yields items and requests; each item goes through the user's
ITEM_PIPELINES and, once it has passed them, to `<prefix>.items`. The lease of the page it came
from is acknowledged only when the page's own message (or its silent outcome) and every one of its
items are confirmed by Kafka, so a crash at any point re-crawls the page instead of losing an item
(delivery is at least once; the same item comes again with the same `request_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itemadapter import ItemAdapter
from scrapy.http import Response

from crawler.meta import LEASE
from crawler.page import timestamp

_ATTRIBUTE = "_shoal_item_ledger"

# Called when a page is complete: (first user error or None, whether an item failed to reach Kafka).
Then = Callable[[str | None, bool], None]


def item_message(item: Any, response: Response, key_field: str | None = None) -> dict[str, Any]:
    """The message of one item (docs/how-to/own-spider.md): the item under `item`, the crawl's
    identity beside it, so item fields never collide with Shoal's. `key_field` (the spider's
    `item_key`) names the item field that identifies the record, for the sink and other consumers."""
    meta = response.meta
    lease = meta.get(LEASE)
    request = response.request
    message = {
        "appid": meta.get("appid"),
        "crawlid": meta.get("crawlid"),
        "spiderid": meta.get("spiderid"),
        "url": request.url if request is not None else response.url,
        "request_id": meta.get("request_id") or (lease.request_id if lease else None),
        "timestamp": timestamp(),
        "item_type": type(item).__name__,
        "item": ItemAdapter(item).asdict(),
    }
    if key_field:
        message["item_key"] = key_field
    return message


@dataclass(slots=True)
class _Page:
    pending: int = 0  # items yielded and not yet confirmed, dropped or failed
    error: str | None = None  # the first exception of user code for this page
    lost: bool = False  # an item Kafka did not confirm: the page must be crawled again
    then: Then | None = None  # set once the page's own message is confirmed


class ItemLedger:
    """Per leased page (by lease member): items still in flight, and what to do when none are left.

    Pages without items or errors never get an entry, so the link spider's path costs one dict miss.
    """

    def __init__(self) -> None:
        self.pages: dict[str, _Page] = {}

    def expect(self, member: str) -> None:
        self._page(member).pending += 1

    def fail(self, member: str, error: str) -> None:
        page = self._page(member)
        page.error = page.error or error

    def done(self, member: str, lost: bool = False) -> None:
        page = self.pages.get(member)
        if page is None:
            return  # the page was already given up (its own message failed)
        page.pending -= 1
        page.lost = page.lost or lost
        self._maybe_finish(member, page)

    def when_done(self, member: str, then: Then) -> None:
        """`then` runs once every item of the page is settled (at once when there are none)."""
        page = self.pages.get(member)
        if page is None:
            then(None, False)
            return
        page.then = then
        self._maybe_finish(member, page)

    def forget(self, member: str) -> None:
        self.pages.pop(member, None)

    def _page(self, member: str) -> _Page:
        page = self.pages.get(member)
        if page is None:
            page = self.pages[member] = _Page()
        return page

    def _maybe_finish(self, member: str, page: _Page) -> None:
        if page.pending <= 0 and page.then is not None:
            del self.pages[member]
            page.then(page.error, page.lost)


def ledger_of(crawler: Any) -> ItemLedger:
    """The crawler's one ledger, shared by the spider middleware that counts and the pipeline that settles."""
    ledger: ItemLedger | None = getattr(crawler, _ATTRIBUTE, None)
    if ledger is None:
        ledger = ItemLedger()
        setattr(crawler, _ATTRIBUTE, ledger)
    return ledger
