"""The warc loop: poll a batch of page messages (and robots.txt answers, `<prefix>.robots_firehose`),
write their records, flush + fsync, then commit.

The sink's shape (sink/loop.py) with a file instead of a transaction: offsets are committed only
after the batch's records are on disk, so a crash (kill -9) replays at most the batch in hand, whose
records may already be in the file it was writing. Those duplicates are whole records of the same
fetch (same WARC-Date, payload and digest), never a partial record: `files.recover` cuts the file
after its last whole record when the next process starts. A message that is not a JSON object is
logged and skipped (the sink dead-letters it; two dead letters of one message would be noise), and
so is one whose fields no record can be made of: no message stops the writer.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import ujson
from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError

from utils.config.clients import ensure_topics, kafka_consumer, subscribe
from utils.config.consumer import IDLE_POLL_MS, commit_past, read_to_end
from utils.config.settings import Settings
from utils.observability.metrics import mark_loop, observe_batch, set_dependency_up
from warc.files import Rotation, WarcFiles, recover
from warc.records import LastPayloads, RecordMaker
from warc.upload import S3Output

log = logging.getLogger(__name__)

KAFKA_BACKOFF = 1.0  # seconds before a batch is read again after a Kafka error
SOFTWARE = "Shoal (warcio)"


def warc_directory(settings: Settings) -> Path:
    """WARC_DIR, or `<RUN_DIR>/warc` when it is empty."""
    return Path(settings.get_str("WARC_DIR") or Path(settings.get_str("RUN_DIR")) / "warc")


def component_id() -> str:
    """The supervised program's name (`warc`), else `warc-<pid>`: part of every file name."""
    return os.environ.get("SUPERVISOR_PROCESS_NAME") or f"warc-{os.getpid()}"


class Archiver:
    def __init__(self, settings: Settings, consumer: KafkaConsumer, files: WarcFiles,
                 output: S3Output | None = None) -> None:  # fmt: skip
        self.consumer = consumer
        self.files = files
        self.output = output  # closed files go to S3 (WARC_S3_BUCKET), else they stay in the directory
        self._queued = 0  # how many of files.closed were handed to `output`
        self._upload_stop = threading.Event()
        self._uploader: threading.Thread | None = None
        if output is not None:  # its own thread: an upload may outlast the consumer's max poll interval
            self._uploader = threading.Thread(target=output.run, args=(self._upload_stop,), name="warc-upload",
                                              daemon=True)  # fmt: skip
            self._uploader.start()
        self.maker = RecordMaker(files.builder(), LastPayloads(settings.get_int("WARC_DIGEST_CACHE")),
                                 settings.get_list("WARC_DOM_SPIDERS"))  # fmt: skip
        self.poll_ms = settings.get_int("KAFKA_CONSUMER_TIMEOUT")
        self.batch_size = max(settings.get_int("WARC_BATCH"), 1)
        self.pages = 0  # page messages archived since start
        self.records = 0  # WARC records written since start (warcinfo records not counted)
        self.skipped = 0  # messages that were not page messages

    @classmethod
    def from_settings(cls, settings: Settings) -> Archiver:
        topic = settings.topic("crawled_firehose")
        topics = [topic, settings.topic("robots_firehose")]  # the robots.txt answers the crawl obeyed
        ensure_topics(settings, topics)
        directory = warc_directory(settings)
        recover(directory)  # files left `.open` by a killed writer, before this one opens its own
        output = S3Output.from_settings(settings)
        if output is not None:
            output.add_directory(directory)  # closed files whose upload failed or never began
        rotation = Rotation(
            prefix=settings.get_str("WARC_PREFIX"),
            max_size=settings.get_int("WARC_MAX_SIZE"),
            max_age=settings.get_float("WARC_MAX_AGE"),
            gzip=settings.get_bool("WARC_GZIP"),
            info=warcinfo(settings, topic),
        )
        consumer = kafka_consumer(settings, [], settings.get_str("WARC_GROUP"),
                                  max_poll_records=max(settings.get_int("WARC_BATCH"), 1))  # fmt: skip
        subscribe(consumer, topics)
        return cls(settings, consumer, WarcFiles(directory, rotation, component_id()), output)

    def run(self, stop: threading.Event) -> None:
        """Archive batches until `stop` is set; the batch in hand is finished, the open file closed."""
        log.info("WARC writer started", extra={"directory": str(self.files.directory)})
        while not stop.is_set():
            try:
                self.run_once(wait_ms=IDLE_POLL_MS)
            except KafkaError as exc:
                log.error("Kafka error; the batch will be read again", extra={"error": repr(exc)})
                set_dependency_up("kafka", False)
                stop.wait(KAFKA_BACKOFF)
        self.close()

    def run_once(self, stop: threading.Event | None = None, wait_ms: int | None = None) -> int:
        """One batch: poll (at most `wait_ms`, default KAFKA_CONSUMER_TIMEOUT), write, sync, commit;
        then rotate if the file is due. The messages handled."""
        mark_loop()
        batch = self.consumer.poll(timeout_ms=wait_ms or self.poll_ms, max_records=self.batch_size)
        records = [record for part in batch.values() for record in part]
        if records:
            began = time.monotonic()
            self.write(records)
            self.files.sync()
            self.commit(records)
            set_dependency_up("kafka", True)
            observe_batch(time.monotonic() - began)
        self.files.rotate_if_due()  # by age too, when nothing comes
        self.upload()
        return len(records)

    def upload(self) -> None:
        """Hand the files closed since the last call to the S3 output's upload thread."""
        if self.output is None:
            return
        for path in self.files.closed[self._queued :]:
            self.output.add(path)
        self._queued = len(self.files.closed)

    def finish_uploads(self) -> None:
        """Stop the upload thread (its upload in hand finished), then try what is left once, here."""
        if self.output is None or self._uploader is None:
            return
        self._upload_stop.set()
        self._uploader.join()
        self.output.upload_due()  # a failure keeps the file for the next start

    def write(self, records: list[ConsumerRecord]) -> None:
        for record in records:
            page = _page(record)
            if page is None:
                self.skipped += 1
                where = f"{record.topic}/{record.partition}@{record.offset}"
                log.warning("Not a page message; skipped", extra={"kafka": where})
                continue
            try:
                made = self.maker.records(page)  # type: ignore[arg-type]
            except (ValueError, TypeError, AttributeError, LookupError) as exc:  # a field of an odd shape
                self.skipped += 1
                log.warning("Page message not archivable; skipped", extra={"url": str(page.get("url"))[:200],
                                                                            "error": repr(exc)[:300]})  # fmt: skip
                continue
            if made:
                self.files.write(made)
                self.records += len(made)
            self.pages += 1

    def commit(self, records: list[ConsumerRecord]) -> bool:
        """Commit past `records`; False on a rebalance (the new owner replays: whole duplicate records)."""
        return commit_past(self.consumer, records)

    def caught_up(self) -> bool:
        """Whether every assigned partition is read to its end (for --burst)."""
        return read_to_end(self.consumer)

    def close(self) -> None:
        self.files.close()
        self.upload()
        self.finish_uploads()
        self.consumer.close(autocommit=False)
        log.info("WARC writer stopped", extra={"pages": self.pages, "records": self.records, "skipped": self.skipped})


def warcinfo(settings: Settings, topic: str) -> dict[str, Any]:
    """The fields of every file's warcinfo record: who wrote it, from what, and how."""
    return {
        "software": SOFTWARE,
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "hostname": socket.gethostname(),
        "isPartOf": topic,
        "shoal-group": settings.get_str("WARC_GROUP"),
        "shoal-gzip": str(settings.get_bool("WARC_GZIP")).lower(),
        "shoal-payload": "the bytes served, content-decoded (docs/how-to/archive.md)",
    }


def _page(record: ConsumerRecord) -> dict[str, Any] | None:
    try:
        value = ujson.loads(record.value)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) and "url" in value else None
