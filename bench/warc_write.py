"""WARC writer: records/s and MiB/s of the warc component's write path against warcio in a plain loop.

Target (DESIGN.md, issue 35): >= 0.8x warcio writing the same records in a plain loop. Both sides
take the same page messages (the demo site's pages as the crawler sends them: JSON bytes, as a poll
returns them) and write record-level-gzipped WARC/1.1 to a temporary directory on the same disk:

- shoal: the component's own path (`warc.loop.Archiver.write` minus the Kafka poll: JSON decode,
  `RecordMaker`: request, response, outlink metadata, header fix-ups, revisit check; `WarcFiles`:
  Heritrix-named `.open` file, CDXJ lines, flush + fsync every WARC_BATCH messages, rotation, rename);
- plain: decode each message, build its request and response records with warcio, write them; one
  fsync and no index at the end.

Each side runs three times, alternately, and the best run counts. Also the size of the same records
with gzip off, and its ratio to gzip on.

    .venv/bin/python -m bench.warc_write [--pages N]

Prints the figures and writes bench/results/warc_write.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import ujson
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from bench.common import print_checks, write_result
from utils.demosite import generate_site
from warc.files import Rotation, WarcFiles
from warc.records import LastPayloads, RecordMaker, payload, request_headers

TARGET = 0.8  # x plain warcio
BATCH = 500  # messages between two fsyncs (WARC_BATCH)


def messages(count: int) -> list[bytes]:
    """`count` page messages made from the demo site's pages (each URL made unique: no revisits)."""
    site = generate_site(hosts=3, pages_per_host=200, seed=35, port=8181)
    pages = sorted(site.pages.items())
    out = []
    for i in range(count):
        url, page = pages[i % len(pages)]
        unique = f"{url}?n={i}"
        body = page.body.decode("utf-8", "replace") if page.content_type.startswith("text/") else ""
        out.append(ujson.dumps({
            "url": unique, "response_url": unique, "status_code": page.status, "status_msg": "OK",
            "response_headers": {"Content-Type": [page.content_type], "Server": ["demosite"]},
            "request_headers": {"Accept": ["text/html"], "User-Agent": ["shoal"]},
            "body": body, "encoding": "utf-8", "success": True, "spiderid": "link",
            "links": [{"url": f"{url}#l{j}", "text": "x"} for j in range(5)],
            "http_version": "HTTP/1.1", "remote_address": "127.0.0.1",
            "fetch_time": f"2026-11-26T10:00:00.{i % 1_000_000:06d}", "timestamp": "2026-11-26T10:00:01",
        }).encode())  # fmt: skip
    return out


def shoal(data: list[bytes], directory: Path, gzip: bool) -> tuple[float, float, int, int]:
    """(seconds, CPU seconds, records, bytes) of the component's write path, its CDXJ index included."""
    began, cpu = time.perf_counter(), time.process_time()
    files = WarcFiles(directory, Rotation(gzip=gzip, info={"software": "bench"}), "bench")
    maker = RecordMaker(files.builder(), LastPayloads(100_000), ["render"])
    records = 0
    for start in range(0, len(data), BATCH):
        for raw in data[start : start + BATCH]:
            made = maker.records(ujson.loads(raw))
            files.write(made)
            records += len(made)
        files.sync()
        files.rotate_if_due()
    closed = files.close()
    assert closed is not None
    return time.perf_counter() - began, time.process_time() - cpu, records, closed.stat().st_size



def plain(data: list[bytes], directory: Path) -> tuple[float, float, int, int]:
    """(seconds, CPU seconds, records, bytes) of warcio in a plain loop: the same request, response and
    outlink metadata records per message, no index."""
    began, cpu = time.perf_counter(), time.process_time()
    path = directory / "plain.warc.gz"
    records = 0
    with open(path, "wb") as stream:
        writer = WARCWriter(stream, gzip=True, warc_version="WARC/1.1")
        for raw in data:
            page: dict[str, Any] = ujson.loads(raw)
            body = payload(page)  # type: ignore[arg-type]
            headers = [(k, v) for k, values in page["response_headers"].items() for v in values]
            http = StatusAndHeaders(f"{page['status_code']} OK", headers, protocol="HTTP/1.1")
            date = {"WARC-Date": page["fetch_time"] + "Z"}
            writer.write_record(writer.create_warc_record(page["url"], "response", payload=BytesIO(body),
                                                          http_headers=http, warc_headers_dict=date))  # fmt: skip
            writer.write_record(writer.create_warc_record(page["url"], "request",
                                                          http_headers=request_headers(page),  # type: ignore[arg-type]
                                                          warc_headers_dict=date))  # fmt: skip
            links = "".join(f"outlink: {link['url']}\r\n" for link in page["links"]).encode()
            writer.write_record(writer.create_warc_record(page["url"], "metadata", payload=BytesIO(links),
                                                          warc_content_type="application/warc-fields",
                                                          warc_headers_dict=date))  # fmt: skip
            records += 3
        stream.flush()
        os.fsync(stream.fileno())
    return time.perf_counter() - began, time.process_time() - cpu, records, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=10_000)
    args = parser.parse_args()
    data = messages(args.pages)
    mib = sum(len(raw) for raw in data) / 2**20
    best: dict[str, tuple[float, float, int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(3):
            for name in ("plain", "shoal"):
                where = Path(tmp) / f"{name}{run}"
                where.mkdir()
                result = plain(data, where) if name == "plain" else shoal(data, where, gzip=True)
                if name not in best or result[0] < best[name][0]:
                    best[name] = result
        raw_size = shoal(data, Path(tmp) / "nogzip", gzip=False)[3]
    (s_sec, s_cpu, s_rec, s_size), (p_sec, p_cpu, p_rec, _) = best["shoal"], best["plain"]
    ratio = p_sec / s_sec
    figures = {
        "pages": args.pages,
        "message_mib": round(mib, 1),
        "shoal_pages_per_s": round(args.pages / s_sec),
        "shoal_records_per_s": round(s_rec / s_sec),
        "shoal_mib_per_s": round(mib / s_sec, 1),
        "shoal_cpu_us_per_page": round(s_cpu / args.pages * 1e6),
        "plain_pages_per_s": round(args.pages / p_sec),
        "plain_records_per_s": round(p_rec / p_sec),
        "plain_mib_per_s": round(mib / p_sec, 1),
        "plain_cpu_us_per_page": round(p_cpu / args.pages * 1e6),
        "pages_ratio_vs_plain": round(ratio, 3),
        "cpu_ratio_vs_plain": round(p_cpu / s_cpu, 3),
        "gzip_bytes": s_size,
        "uncompressed_bytes": raw_size,
        "gzip_size_ratio": round(s_size / raw_size, 3),
        "load_average": round(os.getloadavg()[0], 1),
    }
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    checks = {f"pages/s >= {TARGET}x plain warcio": ratio >= TARGET}
    print_checks(checks)
    print(f"written: {write_result('warc_write', figures, checks)}")


if __name__ == "__main__":
    main()
