"""`shoal feed` and `shoal dump`: Scrapy Cluster's `kafka_monitor.py feed` and `kafkadump.py dump`."""

from __future__ import annotations

import argparse
import base64
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

import ujson

from utils.clients import kafka_consumer, kafka_producer
from utils.settings import Settings

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


def feed(settings: Settings, lines: Iterator[str]) -> tuple[int, int]:
    """Send each JSON line to the incoming topic; returns (sent, refused as not JSON)."""
    topic = settings.incoming_topic
    producer = kafka_producer(settings)
    sent = refused = 0
    futures = []
    try:
        for line in lines:
            try:
                message = ujson.loads(line)
            except ValueError as exc:
                log.error("Not JSON; not fed", extra={"data": line[:200], "error": str(exc)})
                refused += 1
                continue
            log.info("Feeding JSON into %s", topic, extra={"data": message})
            futures.append(producer.send(topic, line.encode()))
        for future in futures:
            future.get(timeout=settings.get_float("KAFKA_FEED_TIMEOUT"))
            sent += 1
    finally:
        producer.close(timeout=10)
    log.info("Successfully fed item to Kafka", extra={"sent": sent, "refused": refused})
    return sent, refused


def feed_command(settings: Settings, args: argparse.Namespace) -> int:
    sent, refused = feed(settings, read_requests(args))
    print(
        f"fed {sent} request(s) to {settings.incoming_topic}"
        + (f"; {refused} refused (not JSON)" if refused else "")
    )
    if args.follow:
        from utils.progress import follow_command  # the progress view, when it exists

        return follow_command(settings, args)
    return 1 if refused else 0


def topic_name(settings: Settings, topic: str) -> str:
    """`crawled_firehose` -> `<prefix>.crawled_firehose`; a dotted name is taken as it is."""
    return topic if "." in topic else settings.topic(topic)


def render(message: Any, args: argparse.Namespace) -> str:
    """One dumped message, shaped by the kafkadump options."""
    if isinstance(message, dict):
        if args.decode_base64 and message.get("body_encoding") == "base64" and message.get("body"):
            raw = base64.b64decode(message["body"])
            message = {**message, "body": raw.decode(message.get("encoding") or "utf-8", "replace")}
        if args.just_body:
            return str(message.get("body", ""))
        if args.no_body:
            message = {k: v for k, v in message.items() if k != "body"}
    indent = 2 if args.pretty else 0
    return ujson.dumps(
        message, indent=indent, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False
    )


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
                    message: Any = ujson.loads(record.value)
                except ValueError:
                    message = (record.value or b"").decode("utf-8", "replace")
                print(render(message, args), flush=True)
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
