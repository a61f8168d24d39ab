"""Crawl requests: queued in `<spiderid>:<domain>:queue` through the frontier's enqueue script."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from kafka_monitor.batch import Batch, Command, Origin
from kafka_monitor.sink_check import SinkCheck
from kafka_monitor.urls import domain_and_fingerprint, url_refusal
from utils.apps.gate import QuotaGate, Refusal
from utils.config.address_policy import AddressPolicy, fetched_url
from utils.config.clients import redis_client
from utils.config.errors import InvalidMessage
from utils.config.safe_regex import InvalidRegex, check_regexes
from utils.config.settings import Settings
from utils.frontier import NewRequest, crawl_request, keys
from utils.frontier.fingerprint import PLAIN_URL
from utils.frontier.revisit_policy import check_pages_regex
from utils.schemas.answers import server_time
from utils.schemas.matching import fields_checker

SCHEMES = ("http://", "https://")  # the only URLs a crawl may fetch (the schema says so too)
NAMING = ("appid", "crawlid", "spiderid", "uuid")  # what a refusal's answer names, checked before it is sent


class CrawlRequest(TypedDict, total=False):
    """utils/schemas/crawl.json (tests check the keys match)."""

    url: str
    appid: str
    crawlid: str
    spiderid: str
    priority: int
    maxdepth: int
    domain_max_pages: int | None
    allowed_domains: list[str] | None
    allow_regex: list[str] | None
    deny_regex: list[str] | None
    deny_extensions: list[str] | None
    expires: int
    useragent: str | None
    cookie: str | None
    attrs: dict[str, Any] | None
    uuid: str
    method: str
    headers: dict[str, str] | None
    body: str | None
    proxy: str | None
    proxy_labels: dict[str, str] | None
    dont_filter: bool
    dupefilter: str
    revisit: dict[str, Any] | None
    refetch: bool
    sitemaps: bool | str
    extract: list[str] | None
    near_duplicates: str | None
    weight: float | None


class CrawlHandler:
    """Scrapy Cluster's ScraperHandler, idempotent on replay and with an optional acknowledgement.

    Its stats keep Scrapy Cluster's name (`stats:kafka-monitor:ScraperHandler`), so a stats answer
    has the keys clients of Scrapy Cluster know.
    """

    schema = "crawl"
    rank = 100
    stat_name = "ScraperHandler"
    event = "Added crawl to Redis"
    refused_event = "Refused crawl over quota"

    def __init__(
        self, state_timeout: int = 86400, policy: AddressPolicy | None = None, sink_alive: SinkCheck | None = None,
        gate: QuotaGate | None = None,
    ) -> None:  # fmt: skip
        self.state_timeout = state_timeout  # the timeout key outlives its expiry by this much
        self.policy = policy  # None = every URL may be queued (tests of other concerns)
        self.sink_alive = sink_alive  # None = `revisit` always accepted (tests of other concerns)
        self.gate = gate  # None = no quota (tests of other concerns)
        self._batch: Batch | None = None  # the batch the gate counts for
        self._refusals: dict[tuple[str, str, str], dict[str, Any]] = {}  # this batch's answer per crawl (no uuid)
        self._named: dict[tuple[str, str, str | None], dict[str, Any]] = {}  # this batch's checked names (no uuid)

    @classmethod
    def from_settings(cls, settings: Settings, **_: Any) -> CrawlHandler:
        return cls(settings.get_int("CRAWL_STATE_TIMEOUT"), AddressPolicy.from_settings(settings),
                   SinkCheck.from_settings(settings), QuotaGate(redis_client(settings)))  # fmt: skip

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        refusal = self._over_quota(message["appid"], batch)  # first: a flood costs no URL parsing
        if refusal is not None:
            self._refuse(message, refusal, batch)
            return
        url = message["url"]
        if "://" not in url:
            url = message["url"] = "http://" + url  # as Scrapy Cluster's request_from_feed retry
        self._check_addresses(url, message.get("proxy"))
        if not url[:8].lower().startswith(SCHEMES):  # file://, ftp://, s3://, data: ... never fetched
            cause = f"url: only http and https URLs are crawled, not {url[:40]!r}"
            raise InvalidMessage("invalid crawl request", cause=cause)
        try:  # what Scrapy fetches is what is queued, throttled and blacklisted (issue 30)
            if not PLAIN_URL.match(url):  # a plain URL is fetched as it is (tests/unit/test_kafka_monitor_urls.py)
                url = message["url"] = fetched_url(url)
        except ValueError as exc:  # e.g. a port out of range
            raise InvalidMessage("invalid crawl request", cause=f"url: {exc}") from None
        try:
            check_regexes(message["allow_regex"])
            check_regexes(message["deny_regex"])
        except InvalidRegex as exc:
            raise InvalidMessage("invalid crawl request", cause=f"regex {exc}") from None
        try:
            domain, fp = domain_and_fingerprint(url, message["method"], message["body"], not message["dont_filter"])
        except ValueError as exc:  # urlsplit: e.g. "Invalid IPv6 URL"
            raise InvalidMessage("invalid crawl request", cause=f"url: {exc}") from None
        if not domain:
            raise InvalidMessage("invalid crawl request", cause=f"url: no host in {url!r}")
        self._check_revisit(message)
        message["ts"] = batch.ts
        record = crawl_request.to_record(message)
        batch.requests.append(self._new_request(message, record, domain, fp, origin))
        if message["expires"]:
            batch.commands.append(self._timeout_command(record, message["expires"]))
        if "uuid" in message:
            batch.acknowledge(self._acknowledgement(message))
        batch.log(self.event, message)

    def refuse_early(self, message: Any, batch: Batch) -> bool:
        """A crawl request of an app over its quota, answered before the schema reads the rest of it:
        a flood costs a dict lookup and the check of the fields its answer names (the request is
        refused whatever the rest holds). False, and nothing counted, for any other message."""
        if self.gate is None or type(message) is not dict or "url" not in message:
            return False
        appid = message.get("appid")
        if type(appid) is not str:
            return False
        self._begin(batch)
        refusal = self.gate.over(appid)
        if refusal is None:
            return False
        named = self._naming(message, appid)
        if named is None:
            return False  # refused by the whole schema instead, like any invalid request
        self.gate.refuse(refusal)
        self._refuse(named, refusal, batch)
        return True

    def _naming(self, message: dict[str, Any], appid: str) -> dict[str, Any] | None:
        """The fields a refusal names, as the schema checks them (None when it refuses them): once per
        crawl and batch for requests without a uuid, whose answer is one per crawl and batch."""
        crawlid, spiderid = message.get("crawlid"), message.get("spiderid")
        key = None
        if "uuid" not in message and type(crawlid) is str and (spiderid is None or type(spiderid) is str):
            key = (appid, crawlid, spiderid)
            named = self._named.get(key)
            if named is not None:
                return named
        try:
            named = fields_checker(self.schema, NAMING)(message)
        except InvalidMessage:
            return None
        if key is not None:
            self._named[key] = named
        return named

    def _over_quota(self, appid: str, batch: Batch) -> Refusal | None:
        if self.gate is None:
            return None
        self._begin(batch)
        return self.gate.admit(appid)

    def _begin(self, batch: Batch) -> None:
        """The gate counts per batch: a new batch adds the last one's admissions to the shared figure."""
        if batch is not self._batch and self.gate is not None:
            self.gate.new_batch()
            self._batch, self._refusals, self._named = batch, {}, {}

    def _refuse(self, message: dict[str, Any], refusal: Refusal, batch: Batch) -> None:
        """Answered, never queued: with a uuid each request has its answer; without, one answer per
        crawl and batch counts them (a flood of a million requests is not a million answers)."""
        if "uuid" in message:
            batch.answers.append({**self._acknowledgement(message), **refusal.fields})
        else:
            crawl = (message["appid"], message["crawlid"], message["spiderid"])
            answer = self._refusals.get(crawl)
            if answer is None:
                answer = self._refusals[crawl] = {**self._acknowledgement(message), **refusal.fields, "count": 0}
                del answer["uuid"]
                batch.answers.append(answer)
            answer["count"] += 1
            answer["used"] = refusal.used
        batch.log(self.refused_event, message)

    def _check_addresses(self, url: str, proxy: Any) -> None:
        """The URL, and the request's own proxy, as the address policy judges them (the crawler again)."""
        if self.policy is None:
            return
        refusal = url_refusal(self.policy, url)
        if refusal:
            raise InvalidMessage("refused crawl request", cause=f"url: refused by the address policy ({refusal})")
        refusal = self.policy.proxy_refusal(proxy) if isinstance(proxy, str) and proxy else None
        if refusal:
            raise InvalidMessage("refused crawl request", cause=f"proxy: refused by the address policy ({refusal})")

    def _check_revisit(self, message: dict[str, Any]) -> None:
        """A `revisit` needs its regex to compile and a sink to keep the state (issue 31)."""
        if message.get("revisit") is None:
            return
        try:
            check_pages_regex(message["revisit"])
        except ValueError as exc:
            raise InvalidMessage("invalid crawl request", cause=str(exc)) from None
        if self.sink_alive is not None and not self.sink_alive():
            cause = "revisit: no sink is running (revisits need PostgreSQL and `shoal sink`; see keep-data-fresh)"
            raise InvalidMessage("refused crawl request", cause=cause)

    def _timeout_command(self, record: dict[str, Any], expires: int) -> Command:
        """Scrapy Cluster's `timeout:<spiderid>:<appid>:<crawlid>`, kept until well after it fires, and
        its entry in the expiry index the redis monitors read (no SCAN for timeout keys)."""
        sid, appid, crawlid = record["spiderid"], record["appid"], record["crawlid"]
        key = keys.timeout(sid, appid, crawlid)
        ttl = max(int(expires - time.time()), 0) + self.state_timeout
        member = keys.crawl_member(sid, appid, crawlid)

        def command(pipe: Any) -> None:
            pipe.set(key, expires, ex=ttl)
            pipe.zadd(keys.TIMEOUTS, {member: expires})

        return command

    @staticmethod
    def _new_request(
        message: dict[str, Any], record: dict[str, Any], domain: str, fp: bytes | None, origin: Origin
    ) -> NewRequest:
        return NewRequest(
            spiderid=record["spiderid"],
            domain=domain,
            priority=record["priority"],
            appid=record["appid"],
            crawlid=record["crawlid"],
            **crawl_request.encode(record)._asdict(),
            fingerprint=None if message.get("refetch") else fp,  # a revisit is not a duplicate
            max_pages=0 if message.get("refetch") else message["domain_max_pages"] or 0,
            seed=True,
            offset_key=keys.ingest_marks(origin.topic, origin.partition),
            offset=origin.offset,
            mark=origin.fingerprint,
            expires=message["expires"],
            dupefilter=message.get("dupefilter", ""),
        )

    @staticmethod
    def _acknowledgement(message: dict[str, Any]) -> dict[str, Any]:
        return {
            "action": "crawl",
            "status": "queued",
            "uuid": message.get("uuid"),
            "appid": message["appid"],
            "crawlid": message["crawlid"],
            "spiderid": message["spiderid"],
            "server_time": server_time(),
        }
