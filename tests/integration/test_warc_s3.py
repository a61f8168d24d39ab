"""Issue 35: closed WARC files and their indexes go to a real S3-compatible server (s3rver, npm) on loopback,
multipart past WARC_S3_PART_SIZE, and are removed locally only once the bucket holds them; a failed upload
keeps the files and is tried again; credentials come from a file and never reach the log."""

from __future__ import annotations

import io
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.support.s3rver import KEY_ID, SECRET, s3rver
from tests.support.services import wait_until
from utils.config.settings import Settings
from utils.services import free_port
from utils.services.process import LocalService
from warc.files import Rotation, WarcFiles
from warc.records import LastPayloads, RecordMaker
from warc.upload import S3Output

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BUCKET = "shoal-warc"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalService]:
    service = s3rver(tmp_path_factory.mktemp("s3rver"), BUCKET)
    service.start()
    try:
        service.wait_ready(60)
        yield service
    finally:
        service.stop()


def credentials_file(tmp_path: Path, key_id: str = KEY_ID, secret: str = SECRET) -> Path:
    path = tmp_path / "credentials"
    path.write_text(f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n")
    return path


def output(tmp_path: Path, endpoint: str, key_id: str = KEY_ID, secret: str = SECRET, **more: str) -> S3Output:
    values = {"WARC_S3_BUCKET": BUCKET, "WARC_S3_PREFIX": f"t{uuid.uuid4().hex[:8]}/", "WARC_S3_REGION": "us-east-1",
              "WARC_S3_ENDPOINT_URL": f"http://{endpoint}", "WARC_S3_PART_SIZE": str(5 << 20), "WARC_S3_RETRY": "0",
              "WARC_S3_CREDENTIALS_FILE": str(credentials_file(tmp_path, key_id, secret)), **more}  # fmt: skip
    made = S3Output.from_settings(Settings.load(environ={f"SHOAL_{k}": v for k, v in values.items()}))
    assert made is not None
    return made


def warc_file(directory: Path, pages: int, body_bytes: int) -> Path:
    """A closed WARC file (and its .cdxj) of `pages` pages of incompressible bodies."""
    files = WarcFiles(directory, Rotation(info={"software": "test"}), "s3")
    maker = RecordMaker(files.builder(), LastPayloads(100), [])
    for i in range(pages):
        url = f"http://127.0.0.1:9/{i}.bin"
        files.write(maker.records({"url": url, "response_url": url, "status_code": 200, "status_msg": "OK",  # type: ignore[arg-type]
                                   "success": True, "response_headers": {"Content-Type": ["application/octet-stream"]},
                                   "request_headers": {}, "body": os.urandom(body_bytes).hex(), "encoding": "ascii",
                                   "links": [], "http_version": "HTTP/1.1", "remote_address": "127.0.0.1",
                                   "fetch_time": f"2026-11-26T21:00:{i:02d}.000000"}))  # fmt: skip
    closed = files.close()
    assert closed is not None
    return closed


def client(endpoint: str) -> object:
    return boto3.client("s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                        aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)  # fmt: skip


def test_a_closed_file_and_its_index_are_uploaded_in_parts_then_removed(server: LocalService, tmp_path: Path) -> None:
    warc = warc_file(tmp_path / "warc", pages=8, body_bytes=900_000)  # ~7 MiB gzipped: two parts of 5 MiB
    index = warc.with_name(warc.name + ".cdxj")
    sent = {warc.name: warc.read_bytes(), index.name: index.read_bytes()}
    assert len(sent[warc.name]) > 6 << 20
    s3 = output(tmp_path, server.address)
    s3.add(warc)
    assert s3.upload_due() == [warc]
    assert not warc.exists()
    assert not index.exists()
    bucket = client(server.address)
    for name, data in sent.items():
        stored = bucket.get_object(Bucket=BUCKET, Key=s3.prefix + name)  # type: ignore[attr-defined]
        assert stored["Body"].read() == data, name
    parts = [line for line in server.log_path.read_text().splitlines() if f"{warc.name}?uploadId=" in line]
    assert sum("partNumber=" in line for line in parts) == 2  # a multipart upload of two parts (s3rver's log)
    body = bucket.get_object(Bucket=BUCKET, Key=s3.prefix + warc.name)["Body"].read()  # type: ignore[attr-defined]
    records = [r.rec_type for r in ArchiveIterator(io.BytesIO(body), check_digests="raise")]
    assert records.count("response") == 8


def test_a_failed_upload_keeps_the_files_and_is_tried_again(tmp_path: Path) -> None:
    port = free_port()
    warc = warc_file(tmp_path / "warc", pages=3, body_bytes=1000)
    s3 = output(tmp_path, f"127.0.0.1:{port}")
    s3.add(warc)
    assert s3.upload_due() == []  # nothing listens: kept
    assert warc.exists()
    assert warc.with_name(warc.name + ".cdxj").exists()
    assert s3.failures == 1
    late = s3rver(tmp_path / "s3", BUCKET, port)
    late.start()
    try:
        late.wait_ready(60)
        assert s3.upload_due() == [warc]  # WARC_S3_RETRY 0: due again at once
        assert not warc.exists()
        keys = client(late.address).list_objects_v2(Bucket=BUCKET, Prefix=s3.prefix)["Contents"]  # type: ignore[attr-defined]
        assert sorted(k["Key"] for k in keys) == sorted(s3.prefix + n for n in (warc.name, warc.name + ".cdxj"))
    finally:
        late.stop()


def test_refused_credentials_keep_the_file_and_the_secret_is_never_logged(
    server: LocalService, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = f"not-{uuid.uuid4().hex}"
    warc = warc_file(tmp_path / "warc", pages=2, body_bytes=1000)
    s3 = output(tmp_path, server.address, key_id="NOT-S3RVER", secret=secret, WARC_S3_RETRY="3600")
    caplog.set_level(logging.DEBUG)
    s3.add(warc)
    assert s3.upload_due() == []
    assert warc.exists()
    assert s3.upload_due() == []  # not due for an hour
    assert s3.failures == 1
    assert "WARC upload failed" in caplog.text
    assert secret not in caplog.text
    s3.pending.clear()
    s3.add_directory(warc.parent)  # the next start takes it up
    assert s3.upload_due() == []
    assert list(s3.pending) == [warc]
    assert s3.failures == 2


def test_the_warc_loop_hands_each_file_it_closes_to_the_bucket(server: LocalService, tmp_path: Path) -> None:
    from warc.loop import Archiver

    s3 = output(tmp_path, server.address)
    first = warc_file(tmp_path / "warc", pages=1, body_bytes=100)
    files = WarcFiles(tmp_path / "warc", Rotation(max_age=0.0, info={"software": "test"}), "loop")
    archiver = Archiver(Settings.load(environ={}), consumer=None, files=files, output=s3)  # type: ignore[arg-type]
    s3.add_directory(files.directory)  # as from_settings does: a file closed before this process began
    files.write(archiver.maker.records({"url": "http://127.0.0.1:9/x", "status_code": 200, "body": "x",  # type: ignore[arg-type]
                                        "response_headers": {}, "fetch_time": "2026-11-26T21:00:00"}))  # fmt: skip
    files.rotate_if_due()  # WARC_MAX_AGE 0: closed at once
    archiver.upload()  # handed to the upload thread
    wait_until(lambda: len(s3.uploaded) == 2, 30)
    archiver.finish_uploads()
    assert sorted(p.name for p in (tmp_path / "warc").iterdir()) == []
    assert s3.uploaded == sorted(s3.prefix + p.name for p in (first, files.closed[0]))
