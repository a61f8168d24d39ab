"""Kafka records to rows: a page message gives a pages row and a crawl-log row, an item message an items row.

Anything that cannot become a row (not JSON, not an object, a required field missing or of the
wrong type, a timestamp that does not parse) becomes a dead letter with the reason instead, so one
bad message never fails the batch it came in.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import ujson
from kafka.consumer.fetcher import ConsumerRecord

from utils.schemas.answers import dead_letter

SOURCE = "sink"
ITEM_IDENTITY = ("appid", "crawlid", "spiderid", "url", "request_id", "timestamp", "item_type", "item_key")
PageRow = tuple[Any, ...]  # PAGE_COLUMNS of the staging table, in order
# A crawl's `extract` / `near_duplicates` fields (crawler/extraction.py), NULL when the page has none
EXTRACTED_COLUMNS = ("text", "markdown", "metadata", "simhash", "near_duplicate", "duplicate_of", "cluster_id")
ItemRow = tuple[Any, ...]  # ITEM_COLUMNS
LogRow = tuple[Any, ...]  # LOG_COLUMNS
RevisitRow = tuple[Any, ...]  # sink/revisits.py REVISIT_COLUMNS

PAGE_COLUMNS = ("appid", "url", "crawlid", "spiderid", "status_code", "content_hash", "headers", "links", "body",
                "fetched_at", *EXTRACTED_COLUMNS)  # fmt: skip
ITEM_COLUMNS = ("appid", "item_key", "crawlid", "spiderid", "url", "item_type", "item", "content_hash", "seen_at")
LOG_COLUMNS = ("request_id", "attempt", "url", "appid", "crawlid", "spiderid", "worker", "status_code", "success",
               "error", "fetched_at", "kafka_topic", "kafka_partition", "kafka_offset")  # fmt: skip


class Rejected(ValueError):
    """A message that cannot be stored; the text is the dead letter's reason."""


@dataclass
class Rows:
    """One batch's rows, and the dead letters of the messages that gave none."""

    pages: list[PageRow] = field(default_factory=list)
    items: list[ItemRow] = field(default_factory=list)
    log: list[LogRow] = field(default_factory=list)
    revisits: list[RevisitRow] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.pages) + len(self.items) + len(self.log)


@dataclass(frozen=True)
class Parser:
    """Which topic holds items, whether bodies are kept, and the default item key field."""

    items_topic: str
    store_body: bool = True
    item_key: str = "url"

    def parse(self, records: list[ConsumerRecord]) -> Rows:
        rows = Rows()
        for record in records:
            try:
                self.add(rows, record)
            except Rejected as exc:
                rows.dead_letters.append(_letter(record, str(exc)))
            except (ValueError, TypeError, OverflowError) as exc:  # a shape no check above foresaw
                rows.dead_letters.append(_letter(record, f"cannot be stored: {type(exc).__name__}: {exc}"))
        return rows

    def add(self, rows: Rows, record: ConsumerRecord) -> None:
        message = _decode(record.value)
        if record.topic == self.items_topic:
            rows.items.append(item_row(message, self.item_key))
            return
        page, log_row = page_rows(message, record, self.store_body)
        if page is not None and not _not_modified(message) and message.get("kept_out") is not True:
            rows.pages.append(page)
        rows.log.append(log_row)
        revisit = revisit_row(message, page)
        if revisit is not None:
            rows.revisits.append(revisit)


def _decode(value: bytes | None) -> dict[str, Any]:
    try:
        message = ujson.loads(value or b"")
    except ValueError as exc:
        raise Rejected(f"not valid JSON: {exc}") from None
    if not isinstance(message, dict):
        raise Rejected(f"not a JSON object but {type(message).__name__}")
    return message


def _letter(record: ConsumerRecord, reason: str) -> dict[str, Any]:
    raw: Any = record.value
    try:
        raw = ujson.loads(record.value)
    except (ValueError, TypeError):
        pass
    where = {"topic": record.topic, "partition": record.partition, "offset": record.offset}
    return dead_letter(raw, reason, SOURCE, kafka=where)


def _text(message: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = message.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise Rejected(f"field {name!r} must be a non-empty string, got {_shown(value)}")
    return _clean(value)


def _int(message: dict[str, Any], name: str, default: int | None = None) -> int | None:
    value = message.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise Rejected(f"field {name!r} must be a 32-bit integer, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {str(value)[:80]!r}"


def parse_time(message: dict[str, Any], name: str = "timestamp") -> datetime:
    """The message's UTC ISO-8601 time (no zone means UTC, as the crawler writes it)."""
    value = message.get(name)
    if not isinstance(value, str):
        raise Rejected(f"field {name!r} must be an ISO-8601 time, got {_shown(value)}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Rejected(f"field {name!r} is not an ISO-8601 time: {value[:40]!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _clean(text: str) -> str:
    """PostgreSQL text holds neither NUL (it becomes U+FFFD) nor lone surrogates (a JSON "\\ud800"
    escape decodes to one; UTF-8 cannot encode it): they become "?"."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def to_json(value: Any) -> str:
    """Canonical JSON (sorted keys) for a jsonb column; jsonb rejects the \\u0000 escape."""
    try:
        text: str = _clean(ujson.dumps(value, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False))
    except UnicodeEncodeError:  # ujson refuses some lone surrogates (and passes others: _clean)
        text = _SURROGATE_ESCAPE.sub("?", ujson.dumps(value, sort_keys=True, escape_forward_slashes=False))
    return text.replace("\\u0000", "\\ufffd") if "\\u0000" in text else text


def content_hash(text: str) -> bytes:
    """16 bytes of BLAKE2b: equal content, equal hash; cheap enough for 10,000 pages/s."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def page_rows(message: dict[str, Any], record: ConsumerRecord, store_body: bool) -> tuple[PageRow | None, LogRow]:
    """A failed fetch (`success` false) leaves the page's stored content alone: crawl log only."""
    url = _text(message, "url")
    appid, crawlid = _text(message, "appid"), _text(message, "crawlid")
    spiderid = _text(message, "spiderid", required=False)
    status = _int(message, "status_code")
    fetched = parse_time(message)
    success = message.get("success", True)
    if not isinstance(success, bool):
        raise Rejected(f"field 'success' must be true or false, got {_shown(success)}")
    log_row: LogRow = (
        _text(message, "request_id", required=False), _int(message, "attempt", 0), url, appid, crawlid, spiderid,
        _worker(message), status, success, _error(message), fetched, record.topic, record.partition, record.offset,
    )  # fmt: skip
    if not success:
        return None, log_row
    body = message.get("body")
    if body is not None and not isinstance(body, str):
        raise Rejected(f"field 'body' must be a string, got {_shown(body)}")
    body = _clean(body or "")
    page: PageRow = (
        appid, url, crawlid, spiderid, status, content_hash(body), to_json(message.get("response_headers") or {}),
        to_json(message.get("links") or []), body if store_body else None, fetched, *extracted(message),
    )  # fmt: skip
    return page, log_row


def extracted(message: dict[str, Any]) -> tuple[Any, ...]:
    """EXTRACTED_COLUMNS of the message: text, Markdown, metadata (jsonb), SimHash, near-duplicate verdict."""
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise Rejected(f"field 'metadata' must be an object, got {_shown(metadata)}")
    near = message.get("near_duplicate")
    if near is not None and not isinstance(near, bool):
        raise Rejected(f"field 'near_duplicate' must be true or false, got {_shown(near)}")
    return (_text(message, "text", required=False), _text(message, "markdown", required=False),
            to_json(metadata) if metadata is not None else None, _text(message, "simhash", required=False), near,
            _text(message, "duplicate_of", required=False), _text(message, "cluster_id", required=False))  # fmt: skip


def _worker(message: dict[str, Any]) -> str | None:
    worker = message.get("worker")
    return _clean(str(worker)) if worker is not None else None


def _error(message: dict[str, Any]) -> str | None:
    error = message.get("exception") or message.get("error")
    return _clean(str(error))[:2000] if error else None


def item_row(message: dict[str, Any], default_key: str) -> ItemRow:
    """The item's fields are `item` (the crawler's item message) or, without it, every field but the crawl's
    identity; its key is the field the message names in `item_key`, else `default_key`."""
    appid, crawlid, url = _text(message, "appid"), _text(message, "crawlid"), _text(message, "url")
    fields = message.get("item")
    if fields is None:
        fields = {k: v for k, v in message.items() if k not in ITEM_IDENTITY}
    if not isinstance(fields, dict):
        raise Rejected(f"field 'item' must be an object, got {_shown(fields)}")
    key_field = message.get("item_key") or default_key
    if not isinstance(key_field, str):
        raise Rejected(f"field 'item_key' must name a field, got {_shown(key_field)}")
    key = fields.get(key_field, message.get(key_field))
    if key is None or isinstance(key, dict | list) or key == "":
        raise Rejected(f"the item has no usable key field {key_field!r} (got {_shown(key)})")
    document = to_json(fields)
    return (
        appid, _clean(str(key)), crawlid, _text(message, "spiderid", required=False), url,
        _text(message, "item_type", required=False), document, change_hash(message, document), parse_time(message),
    )  # fmt: skip


# --- Issue 31: revisit state -----------------------------------------------------------------------


def change_hash(message: dict[str, Any], content: str) -> bytes:
    """The hash changes are judged by: the user's `fingerprint` (e.g. price and stock) if any, else the content's."""
    fingerprint = message.get("fingerprint")
    if fingerprint is not None:
        if not isinstance(fingerprint, str):
            raise Rejected(f"field 'fingerprint' must be a string, got {_shown(fingerprint)}")
        return content_hash("\x00fingerprint\x00" + fingerprint)
    return content_hash(content)


def _not_modified(message: dict[str, Any]) -> bool:
    return message.get("not_modified") is True or message.get("status_code") == 304


def _header(message: dict[str, Any], name: str) -> str | None:
    """A response header's first value, matched without case (Scrapy spells `Etag`)."""
    headers = message.get("response_headers")
    if not isinstance(headers, dict):
        return None
    for key, values in headers.items():
        if isinstance(key, str) and key.lower() == name:
            value = values[0] if isinstance(values, list) and values else values
            return _clean(value)[:1000] if isinstance(value, str) and value else None
    return None


def revisit_row(message: dict[str, Any], page: PageRow | None) -> RevisitRow | None:
    """The fetch as the revisit schedule sees it (sink/revisits.py), for a page its crawl revisits."""
    policy = message.get("revisit")
    if not isinstance(policy, dict) or page is None:
        return None
    request = policy.get("request")
    request = request if isinstance(request, dict) else {}
    schedule = {k: v for k, v in policy.items() if k != "request"}
    for name in ("interval", "min", "max", "inc", "dec", "error_interval", "gone_interval"):
        value = schedule.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1e9:
            raise Rejected(f"field 'revisit.{name}' must be a number, got {_shown(value)}")
    not_modified = _not_modified(message)
    status = 304 if not_modified else page[4]
    changes = None if not_modified or status is None or status >= 400 else change_hash(message, _clean(
        message.get("body") or ""))  # fmt: skip
    if changes is not None and message.get("fingerprint") is None:
        changes = page[5]
    appid, url, crawlid, spiderid = page[0], page[1], page[2], page[3]
    return (appid, url, crawlid, spiderid, to_json(request), to_json(schedule), status, changes,
            _header(message, "etag"), _header(message, "last-modified"), page[9])  # fmt: skip
