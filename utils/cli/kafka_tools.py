"""`shoal feed` and `shoal dump`: Scrapy Cluster's `kafka_monitor.py feed` and `kafkadump.py dump`.

`feed` sends one request given as an argument, or one per line from a file or stdin, and waits for
the broker to confirm each (Scrapy Cluster's SIGALRM timeout broke off the main thread, its issue
#204; here the producer's own timeout is used). `dump` has kafkadump's options: from the beginning,
no body, just the body, pretty, and base64 bodies decoded with the page's encoding.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import ujson
from kafka.errors import KafkaError

from utils.config.clients import kafka_consumer, kafka_producer
from utils.config.settings import Settings

log = logging.getLogger(__name__)


def read_requests(args: argparse.Namespace, stdin: TextIO = sys.stdin) -> Iterator[str]:
    """The JSON requests named on the command line, in a file, or on stdin, one per line."""
    if args.json and args.json != "-":
        yield args.json
        return
    source = open(args.file) if args.file else stdin  # noqa: SIM115 - closed below
    try:
        for line in source:
            if line.strip():
                yield line.strip()
    finally:
        if args.file:
            source.close()


def feed(settings: Settings, lines: Iterable[str]) -> tuple[list[str], int, int]:
    """Send each JSON line to the incoming topic; returns (lines fed, refused as not JSON, failed)."""
    topic = settings.incoming_topic
    producer = kafka_producer(settings)
    refused = 0
    pending: list[tuple[str, Any]] = []
    try:
        for line in lines:
            try:
                message = ujson.loads(line)
            except ValueError as exc:
                log.error("Not JSON; not fed", extra={"data": line[:200], "error": str(exc)})
                refused += 1
                continue
            log.info("Feeding JSON into %s", topic, extra={"data": message})
            pending.append((line, producer.send(topic, line.encode())))
        fed = _confirmed(pending, settings.get_float("KAFKA_FEED_TIMEOUT"))
    finally:
        producer.close(timeout=10)
    if len(fed) == len(pending):
        log.info("Successfully fed item to Kafka", extra={"sent": len(fed), "refused": refused})
    return fed, refused, len(pending) - len(fed)


def _confirmed(pending: list[tuple[str, Any]], timeout: float) -> list[str]:
    """The lines the broker confirmed within `timeout`; each failure is logged."""
    fed = []
    for line, future in pending:
        try:
            future.get(timeout=timeout)
            fed.append(line)
        except KafkaError as exc:
            log.error("Failed to feed item into Kafka", extra={"data": line[:200], "error": repr(exc)})
    return fed


def feed_command(settings: Settings, args: argparse.Namespace) -> int:
    fed, refused, failed = feed(settings, read_requests(args))
    notes = [f"{refused} refused (not JSON)"] if refused else []
    notes += [f"{failed} not confirmed by the broker"] if failed else []
    print(f"fed {len(fed)} request(s) to {settings.incoming_topic}" + ("; " + ", ".join(notes) if notes else ""))
    if args.follow and fed:
        from utils.frontier.progress import follow_command  # the progress view

        return follow_command(settings, args, fed=fed)
    return 1 if refused or failed else 0


def topic_name(settings: Settings, topic: str) -> str:
    """`crawled_firehose` -> `<prefix>.crawled_firehose`; a dotted name is taken as it is."""
    return topic if "." in topic else settings.topic(topic)


def render(message: Any, args: argparse.Namespace) -> str:
    """One dumped message, shaped by the kafkadump options."""
    if isinstance(message, dict):
        if args.decode_base64 and isinstance(message.get("body"), str):
            message = {**message, "body": _decoded_body(message)}
        if getattr(args, "markdown", False):
            return markdown_of(message)
        if args.just_body:
            return str(message.get("body", ""))
        if args.no_body:
            message = {k: v for k, v in message.items() if k != "body"}
    indent = 2 if args.pretty else 0
    return ujson.dumps(message, indent=indent, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False)


def markdown_of(message: dict[str, Any]) -> str:
    """`dump --markdown`: a page's Markdown (a crawl's `extract`) under an HTML comment naming its URL."""
    url = str(message.get("url", ""))
    markdown = message.get("markdown")
    if not isinstance(markdown, str):
        return f"<!-- {url}: no markdown (the crawl did not ask for it, or its extraction failed) -->"
    return f"<!-- {url} -->\n{markdown}\n"


def _decoded_body(message: dict[str, Any]) -> str:
    """A base64 body as text in the page's encoding (kafkadump -d). Shoal marks such bodies with
    `body_encoding`; Scrapy Cluster's (KAFKA_BASE_64_ENCODE) are unmarked, so a body that is not
    valid base64 is shown as it is."""
    body = message["body"]
    encoding = message.get("encoding") or "utf-8"
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return str(body)
    try:
        return raw.decode(encoding, "replace")
    except LookupError:  # an encoding name Python does not know
        return raw.decode("utf-8", "replace")


def dump_command(settings: Settings, args: argparse.Namespace) -> int:
    topic = topic_name(settings, args.topic)
    reset = "earliest" if args.from_beginning else "latest"
    consumer = kafka_consumer(settings, [topic], args.consumer_group, auto_offset_reset=reset)
    count = size = 0
    last_seen = time.monotonic()
    try:
        while not args.max_messages or count < args.max_messages:
            polled = consumer.poll(timeout_ms=200)
            for record in (r for part in polled.values() for r in part):
                count += 1
                size += len(record.value or b"")
                last_seen = time.monotonic()
                try:
                    print(render(ujson.loads(record.value), args), flush=True)
                except ValueError:  # not JSON: shown as it is, as kafkadump does
                    print((record.value or b"").decode("utf-8", "replace"), flush=True)
                if args.max_messages and count >= args.max_messages:
                    break
            if args.timeout and time.monotonic() - last_seen > args.timeout:
                break
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    kb = size / 1024 / max(count, 1)
    print(f"Num Records: {count}, Total MBs: {size / 1048576:.3f}, kb per message: {kb:.2f}", file=sys.stderr)
    return 0
