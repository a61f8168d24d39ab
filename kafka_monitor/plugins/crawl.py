"""Crawl requests: queued in `<spiderid>:<domain>:queue` through the frontier's enqueue script."""

from __future__ import annotations

from typing import Any

from kafka_monitor.batch import Batch, Origin
from utils import crawl_request, keys
from utils.answers import server_time
from utils.domains import url_domain
from utils.errors import InvalidMessage
from utils.fingerprint import fingerprint
from utils.frontier import NewRequest
from utils.settings import Settings


class CrawlHandler:
    """Scrapy Cluster's ScraperHandler, idempotent on replay and with an optional acknowledgement."""

    schema = "crawl"
    rank = 100

    @classmethod
    def from_settings(cls, settings: Settings, **_: Any) -> CrawlHandler:
        return cls()

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        url = message["url"]
        if "://" not in url:
            url = message["url"] = "http://" + url  # as Scrapy Cluster's request_from_feed retry
        domain = url_domain(url)
        if not domain:
            raise InvalidMessage("invalid crawl request", cause=f"url: no host in {url!r}")
        record = crawl_request.to_record(message, crawl_request.new_request_id(origin.id))
        batch.requests.append(self._new_request(record, domain, origin))
        if message["expires"]:
            key = keys.timeout(record["spiderid"], record["appid"], record["crawlid"])
            batch.commands.append(lambda pipe: pipe.set(key, message["expires"]))
        if "uuid" in message:
            batch.answers.append(self._acknowledgement(message))
        batch.log_events.append(("Added crawl to Redis", {**message, "parsed": True, "valid": True}))

    @staticmethod
    def _new_request(record: dict[str, Any], domain: str, origin: Origin) -> NewRequest:
        body = record.get("body")
        return NewRequest(
            spiderid=record["spiderid"],
            domain=domain,
            priority=record["priority"],
            appid=record["appid"],
            crawlid=record["crawlid"],
            payload=crawl_request.encode(record),
            fingerprint=fingerprint(record["url"], record.get("method", "GET"), body),
            max_pages=record.get("domain_max_pages") or 0,
            seed=True,
            offset_key=keys.ingest_offset(origin.topic, origin.partition),
            offset=origin.offset,
        )

    @staticmethod
    def _acknowledgement(message: dict[str, Any]) -> dict[str, Any]:
        return {
            "action": "crawl",
            "status": "queued",
            "uuid": message["uuid"],
            "appid": message["appid"],
            "crawlid": message["crawlid"],
            "spiderid": message["spiderid"],
            "server_time": server_time(),
        }
