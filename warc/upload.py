"""Closed WARC files and their CDXJ indexes to S3-compatible storage (`pip install shoal[s3]`, boto3).

A closed file is uploaded with boto3's managed transfer (multipart past WARC_S3_PART_SIZE bytes),
then its index; each object is confirmed with a HEAD (the size the bucket reports must be the local
file's) before the local copies are removed, WARC first and index last, so a file is never gone from
both places. A failed upload keeps the files and is tried again WARC_S3_RETRY seconds later, by
this process or, after a restart, by the next one (it takes up every closed file of its directory).
Credentials come from WARC_S3_CREDENTIALS_FILE or boto3's own chain (AWS_ACCESS_KEY_ID/
AWS_SECRET_ACCESS_KEY, ~/.aws); they are handed to boto3 only, never logged. Uploads run in a thread of
their own (`run`): the warc loop must poll Kafka at least every KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS
(10 s), less than a 1 GiB upload may take.
"""

from __future__ import annotations

import configparser
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.config.errors import ShoalError
from utils.config.settings import Settings

log = logging.getLogger(__name__)

RETRIES = 3  # botocore's attempts per request (standard mode) before an upload counts as failed
TIMEOUT = 30.0  # seconds: connect and read timeout of each request
POLL = 1.0  # seconds between two looks of the upload thread at its queue


class S3Output:
    """Closed files waiting for the bucket: `add` them, `upload_due` sends those whose time has come."""

    def __init__(self, client: Any, bucket: str, prefix: str, transfer: Any, retry_after: float,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.transfer = transfer  # boto3.s3.transfer.TransferConfig
        self.retry_after = retry_after
        self.clock = clock
        self.pending: dict[Path, float] = {}  # closed WARC file -> when (clock) it may be tried
        self._added: queue.SimpleQueue[Path] = queue.SimpleQueue()  # from the warc loop's thread
        self.uploaded: list[str] = []  # keys of the WARC files this process uploaded, oldest first
        self.failures = 0  # failed attempts since start

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Output | None:
        """None when WARC_S3_BUCKET is empty (the files stay in WARC_DIR); a ShoalError without boto3."""
        bucket = settings.get_str("WARC_S3_BUCKET")
        if not bucket:
            return None
        try:
            import boto3
            from boto3.s3.transfer import TransferConfig
            from botocore.config import Config
        except ImportError as exc:
            raise ShoalError("WARC_S3_BUCKET is set but boto3 is not installed: pip install 'shoal[s3]'") from exc
        part = max(settings.get_int("WARC_S3_PART_SIZE"), 5 << 20)  # S3's smallest part
        config = Config(retries={"mode": "standard", "max_attempts": RETRIES}, connect_timeout=TIMEOUT,
                        read_timeout=TIMEOUT, s3={"addressing_style": "path"})  # fmt: skip
        client = boto3.client("s3", endpoint_url=settings.get_str("WARC_S3_ENDPOINT_URL") or None,
                              region_name=settings.get_str("WARC_S3_REGION") or None, config=config,
                              **credentials(settings.get_str("WARC_S3_CREDENTIALS_FILE")))  # fmt: skip
        transfer = TransferConfig(multipart_threshold=part, multipart_chunksize=part)
        return cls(client, bucket, settings.get_str("WARC_S3_PREFIX"), transfer,
                   settings.get_float("WARC_S3_RETRY"))  # fmt: skip

    def add(self, warc: Path) -> None:
        """Queue a closed WARC file (its `.cdxj` goes with it), due now; safe from any thread."""
        self._added.put(warc)

    def add_directory(self, directory: Path) -> None:
        """Queue every closed WARC file of `directory`: left by a failed upload or a killed process."""
        for pattern in ("*.warc.gz", "*.warc"):
            for warc in sorted(directory.glob(pattern)):
                self.add(warc)

    def upload_due(self) -> list[Path]:
        """Upload every queued file that is due; the ones done (uploaded, confirmed, removed)."""
        done = []
        now = self.clock()
        while not self._added.empty():
            self.pending.setdefault(self._added.get(), now)
        for warc, due in sorted(self.pending.items()):
            if due > now:
                continue
            if self._upload(warc):
                del self.pending[warc]
                done.append(warc)
            else:
                self.pending[warc] = self.clock() + self.retry_after
        return done

    def run(self, stop: threading.Event, interval: float = POLL) -> None:
        """Upload what is due until `stop` is set (the upload thread); the upload in hand is finished."""
        while not stop.is_set():
            try:
                self.upload_due()
            except Exception:  # the thread's boundary: an unforeseen error must not end the uploads
                log.exception("WARC upload round failed")
            stop.wait(interval)

    def key(self, path: Path) -> str:
        return f"{self.prefix}{path.name}"

    def _upload(self, warc: Path) -> bool:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        index = warc.with_name(warc.name + ".cdxj")
        try:
            for path in (warc, index):
                if path.exists():
                    self._put(path)
        except (Boto3Error, BotoCoreError, ClientError, OSError, ShoalError) as exc:
            self.failures += 1
            log.warning("WARC upload failed; the file is kept and tried again",
                        extra={"file": str(warc), "bucket": self.bucket, "error": repr(exc)[:300],
                               "retry_in_s": self.retry_after})  # fmt: skip
            return False
        for path in (warc, index):
            path.unlink(missing_ok=True)  # another process sharing the directory may have been first
        self.uploaded.append(self.key(warc))
        log.info("WARC file uploaded", extra={"file": warc.name, "bucket": self.bucket, "key": self.key(warc)})
        return True

    def _put(self, path: Path) -> None:
        """Upload `path` and confirm the bucket holds its size; FileNotFoundError once it is gone."""
        size = path.stat().st_size
        self.client.upload_file(str(path), self.bucket, self.key(path), Config=self.transfer)
        stored = self.client.head_object(Bucket=self.bucket, Key=self.key(path))["ContentLength"]
        if stored != size:
            raise ShoalError(f"s3://{self.bucket}/{self.key(path)} holds {stored} bytes, the file {size}")


def credentials(path: str) -> dict[str, str]:
    """boto3 client keywords from an AWS shared-credentials file's `[default]` section; {} (boto3's
    own chain) when `path` is empty. The values are never logged, nor put in an error message."""
    if not path:
        return {}
    parser = configparser.ConfigParser()
    if not parser.read(path) or not parser.has_section("default"):
        raise ShoalError(f"WARC_S3_CREDENTIALS_FILE {path}: no [default] section (aws_access_key_id, ...)")
    section = parser["default"]
    names = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    found = {name: section[name] for name in names if section.get(name)}
    if len(found) < 2 and "aws_session_token" not in found:
        raise ShoalError(f"WARC_S3_CREDENTIALS_FILE {path}: needs aws_access_key_id and aws_secret_access_key")
    return found
