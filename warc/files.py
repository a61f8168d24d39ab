"""WARC files on disk: named as Heritrix names them, written as `<name>.open`, closed by a rename.

`<prefix>-<17-digit UTC timestamp>-<serial>-<pid>~<host>~<component id>.warc.gz`: a file is opened
with its `warcinfo` record, takes records until it passes WARC_MAX_SIZE bytes or WARC_MAX_AGE
seconds, and is then fsynced, renamed to its final name and indexed (`<name>.cdxj`, pywb's CDXJ:
the lines cdxj-indexer writes, made as the records are written). A writer holds an exclusive lock
on its `.open` file, so at start a process closes every `.open` file of the directory whose writer
is gone (killed): the file is cut after its last complete record and closed like any other. No
reader ever sees a file that warcio cannot read.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from cdxj_indexer.main import CDXJIndexer, write_cdx_index
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.timeutils import iso_date_to_timestamp
from warcio.warcwriter import WARCWriter

log = logging.getLogger(__name__)

OPEN = ".open"


@dataclass
class Rotation:
    prefix: str = "SHOAL"
    max_size: int = 1 << 30  # bytes
    max_age: float = 3600.0  # seconds
    gzip: bool = True
    info: dict[str, Any] = field(default_factory=dict)  # the warcinfo record's fields


def file_name(prefix: str, when: float, serial: int, component: str, gzip: bool) -> str:
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y%m%d%H%M%S%f")[:17]
    safe = component.replace("/", "_").replace("~", "_")
    return f"{prefix}-{stamp}-{serial:05d}-{os.getpid()}~{socket.gethostname()}~{safe}.warc" + (".gz" if gzip else "")


class WarcFiles:
    """The one open file of a writer process: write, sync, rotate, close (rename + index)."""

    def __init__(self, directory: Path, rotation: Rotation, component: str,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.directory = directory
        self.rotation = rotation
        self.component = component
        self.clock = clock
        self.serial = 0
        self.closed: list[Path] = []  # files this writer closed, oldest first
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._opened_at = 0.0
        self._lines: list[str] = []  # the open file's CDXJ lines, written sorted when it closes
        self._indexer = CDXJIndexer(None, [])  # its URL keys and line format, so the lines are its own
        self.writer: WARCWriter | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def path(self) -> Path | None:
        """The final name of the open file (it is `<path>.open` until closed)."""
        return self._path

    def builder(self) -> WARCWriter:
        """A writer not bound to a file: makes records (ids, digests) the same way."""
        return WARCWriter(None, gzip=self.rotation.gzip, warc_version="WARC/1.1")

    def write(self, records: Iterable[Any]) -> None:
        """Append records to the open file (opened first if none is), indexing them; not yet synced."""
        writer = self._ensure_open()
        assert self._file is not None
        assert self._path is not None
        for record in records:
            offset = self._file.tell()
            writer.write_record(record)
            self._index(record, offset, self._file.tell() - offset, self._path.name)

    def _index(self, record: Any, offset: int, length: int, filename: str) -> None:
        """The CDXJ line cdxj-indexer writes for this record (same records, fields, key and format:
        tests/unit/test_warc_records.py compares the two), made while writing instead of by reading
        the file again, which cost half of the writer's time (bench/warc_write.py)."""
        kind = record.rec_type
        if kind not in CDXJIndexer.DEFAULT_RECORDS:
            return
        headers = {name.lower(): value for name, value in record.rec_headers.headers}  # one pass, not five
        if kind == "metadata" and headers.get("content-type") == "application/warc-fields":
            return
        http = record.http_headers if kind in ("response", "revisit", "request") else None
        if kind == "revisit":
            mime: str | None = "warc/revisit"
        else:
            mime = http.get_header("content-type") if http is not None else headers.get("content-type")
            mime = CDXJIndexer.RE_SPACE.split(mime, 1)[0].strip() if mime else mime
        url = headers.get("warc-target-uri")
        fields = {"url": url, "mime": mime, "status": http.get_statuscode() if http is not None else None,
                  "digest": headers.get("warc-payload-digest"), "length": str(length), "offset": str(offset),
                  "filename": filename}  # fmt: skip
        index = {name: value for name, value in fields.items() if value}
        key = self._indexer.get_url_key(url)
        self._lines.append(f"{key} {iso_date_to_timestamp(headers.get('warc-date'))} {json.dumps(index)}\n")

    def sync(self) -> None:
        """flush + fsync: what is written survives a crash (offsets may be committed after this)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def rotate_if_due(self) -> Path | None:
        """Close the open file when it passed its size or age; the closed path, or None."""
        if self._file is None:
            return None
        too_big = self._file.tell() >= self.rotation.max_size
        too_old = self.clock() - self._opened_at >= self.rotation.max_age
        return self.close() if too_big or too_old else None

    def close(self) -> Path | None:
        """fsync, rename `.open` away, index; the closed path (None when nothing was open)."""
        if self._file is None or self._path is None:
            return None
        self.sync()
        final = self._path
        os.rename(self._open_path(final), final)
        _fsync_dir(self.directory)
        self._file.close()  # the lock goes with it, after the rename
        self._file, self._path, self.writer = None, None, None
        write_index(final, self._lines)
        self._lines = []
        self.closed.append(final)
        log.info("WARC file closed", extra={"file": str(final), "bytes": final.stat().st_size})
        return final

    def _ensure_open(self) -> WARCWriter:
        if self.writer is not None:
            return self.writer
        now = self.clock()
        name = file_name(self.rotation.prefix, now, self.serial, self.component, self.rotation.gzip)
        self.serial += 1
        final = self.directory / name
        # Locked under a name `recover` never looks at, then renamed: no other process can find the
        # `.open` file unlocked (and take it for a killed writer's) between its creation and the lock.
        creating = final.with_name(f".{name}.creating")
        handle = open(creating, "xb")  # noqa: SIM115 (held open until the rename)
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(creating, self._open_path(final))
        self._file, self._path, self._opened_at = handle, final, now
        self.writer = WARCWriter(handle, gzip=self.rotation.gzip, warc_version="WARC/1.1")
        self.writer.write_record(self.writer.create_warcinfo_record(name, dict(self.rotation.info)))
        log.info("WARC file opened", extra={"file": str(final)})
        return self.writer

    @staticmethod
    def _open_path(final: Path) -> Path:
        return final.with_name(final.name + OPEN)


def write_index(warc: Path, lines: list[str]) -> Path:
    """`<warc>.cdxj` from lines made while writing, sorted as cdxj-indexer sorts them."""
    target = warc.with_name(warc.name + ".cdxj")
    partial = target.with_name(target.name + ".partial")
    with open(partial, "w", encoding="utf-8") as out:
        out.writelines(sorted(lines))
    os.replace(partial, target)
    return target


def index(warc: Path) -> Path:
    """`<warc>.cdxj` next to it, sorted (pywb's CDXJ), written under a temporary name then renamed."""
    target = warc.with_name(warc.name + ".cdxj")
    partial = target.with_name(target.name + ".partial")
    write_cdx_index(str(partial), [str(warc)], {"sort": True, "post_append": True, "dir_root": str(warc.parent)})
    os.replace(partial, target)
    return target


def recover(directory: Path) -> list[Path]:
    """Close every `.open` file of `directory` that no live writer holds: cut after its last complete
    record, renamed, indexed. A file left with its warcinfo record only is removed. The paths closed."""
    closed: list[Path] = []
    if not directory.is_dir():
        return closed
    for path in sorted(directory.glob("*" + OPEN)):
        with open(path, "r+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is alive
            end, records = complete_end(path)
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
            final = path.with_name(path.name[: -len(OPEN)])
            if records <= 1:
                path.unlink()
                log.info("Empty WARC file of a stopped writer removed", extra={"file": str(path)})
                continue
            os.rename(path, final)
        _fsync_dir(directory)
        index(final)
        closed.append(final)
        log.warning("WARC file of a stopped writer closed", extra={"file": str(final), "records": records})
    return closed


def complete_end(path: Path) -> tuple[int, int]:
    """(the offset just past the last record that is whole, how many records that is).

    Record-level gzip: a record is whole when its gzip member ends (zlib reaches the member's end,
    CRC and size checked), so a member cut by a crash is found however little of it is missing.
    Uncompressed: warcio reads each record and its block must be as long as its Content-Length."""
    if path.name.endswith(".gz" + OPEN) or path.name.endswith(".gz"):
        return _gzip_members_end(path)
    end, count = 0, 0
    with open(path, "rb") as stream:
        iterator = ArchiveIterator(stream, check_digests=False, ensure_http_headers=False)
        try:
            for record in iterator:
                if len(record.raw_stream.read()) != record.length:
                    break
                iterator.read_to_end(record)
                end = iterator.get_record_offset() + iterator.get_record_length()
                count += 1
        except (ArchiveLoadFailed, EOFError, OSError, ValueError) as exc:
            log.info("WARC file cut after its last whole record", extra={"file": str(path), "error": repr(exc)})
    return end, count


def _gzip_members_end(path: Path, chunk: int = 1 << 20) -> tuple[int, int]:
    end, count, consumed = 0, 0, 0
    member = zlib.decompressobj(wbits=31)
    with open(path, "rb") as stream:
        pending = stream.read(chunk)
        while pending:
            try:
                member.decompress(pending)
            except zlib.error:
                break
            consumed += len(pending) - len(member.unused_data)
            if member.eof:
                end, count = consumed, count + 1
                pending = member.unused_data
                member = zlib.decompressobj(wbits=31)
                if pending:
                    continue
            pending = stream.read(chunk)
    return end, count


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
