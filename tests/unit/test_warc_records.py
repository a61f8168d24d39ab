"""Issue 35: page messages become WARC/1.1 records that warcio reads back as they were written (no sockets).
Issue 44: redirect hops, robots.txt answers, byte-order marks, request lines and header bytes as served."""

from __future__ import annotations

import base64
import gzip
import json
import random
from pathlib import Path
from types import SimpleNamespace

from warcio.archiveiterator import ArchiveIterator

from utils.config.clients import topic_configs
from utils.config.settings import Settings
from warc.files import Rotation, WarcFiles, complete_end, index, recover
from warc.loop import Archiver
from warc.records import IDENTICAL, NOT_MODIFIED, LastPayloads, RecordMaker, sha1_digest

URL = "http://127.0.0.1:8181/a.html"


def page(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "url": URL, "response_url": URL, "status_code": 200, "status_msg": "OK", "success": True,
        "response_headers": {"Content-Type": ["text/html; charset=utf-8"]},
        "raw_response_headers": [["Content-Type", "text/html; charset=utf-8"], ["Content-Encoding", "gzip"],
                                 ["Content-Length", "31"], ["Set-Cookie", "a=1"]],
        "request_headers": {"Accept": ["*/*"]}, "body": "<p>héllo</p>", "encoding": "utf-8",
        "links": [{"url": "http://127.0.0.1:8181/b.html", "text": "b"}], "spiderid": "link",
        "http_version": "HTTP/1.1", "remote_address": "127.0.0.1", "fetch_time": "2026-11-26T21:00:00.250000",
    }  # fmt: skip
    base.update(fields)
    return base


def written(tmp_path: Path, pages: list[dict[str, object]], gzip_on: bool = True) -> list[dict[str, object]]:
    files = WarcFiles(tmp_path, Rotation(gzip=gzip_on, info={"software": "test"}), "unit")
    maker = RecordMaker(files.builder(), LastPayloads(100), ["render"])
    for one in pages:
        files.write(maker.records(one))  # type: ignore[arg-type]
    closed = files.close()
    assert closed is not None
    assert not list(tmp_path.glob("*.open"))
    out = []
    with open(closed, "rb") as stream:
        for record in ArchiveIterator(stream, check_digests=True):
            out.append({"type": record.rec_type, "headers": dict(record.rec_headers.headers),
                        "http": record.http_headers, "payload": record.content_stream().read()})  # fmt: skip
    return out


def test_a_page_is_a_response_and_a_request_with_outlinks_its_payload_digest_true(tmp_path: Path) -> None:
    records = written(tmp_path, [page()])
    assert [r["type"] for r in records] == ["warcinfo", "response", "request", "metadata"]
    response, request, links = records[1], records[2], records[3]
    body = "<p>héllo</p>".encode()
    assert response["payload"] == body
    assert response["headers"]["WARC-Payload-Digest"] == sha1_digest(body)
    assert response["headers"]["WARC-Date"] == "2026-11-26T21:00:00.250000Z"
    assert response["headers"]["WARC-IP-Address"] == "127.0.0.1"
    http = response["http"]
    assert http.protocol == "HTTP/1.1"
    assert http.get_statuscode() == "200"
    # Headers in the order received; the decoded body's encoding and length kept under pywb's prefix.
    assert [n for n, _ in http.headers] == ["Content-Type", "X-Archive-Orig-Content-Encoding",
                                            "X-Archive-Orig-Content-Length", "Set-Cookie", "Content-Length"]
    assert http.get_header("Content-Length") == str(len(body))
    assert request["headers"]["WARC-Concurrent-To"] == response["headers"]["WARC-Record-ID"]
    assert request["http"].get_header("Host") == "127.0.0.1:8181"
    assert links["payload"] == b"outlink: http://127.0.0.1:8181/b.html\r\n"
    assert links["headers"]["WARC-Concurrent-To"] == response["headers"]["WARC-Record-ID"]


def test_same_payload_again_is_a_revisit_and_a_304_is_a_server_not_modified_revisit(tmp_path: Path) -> None:
    later = {"fetch_time": "2026-11-27T21:00:00.000000"}
    records = written(tmp_path, [page(), page(**later), page(status_code=304, status_msg="Not Modified", body="",
                                                               fetch_time="2026-11-28T21:00:00.000000")])
    mains = [r for r in records if r["type"] in ("response", "revisit")]
    assert [r["type"] for r in mains] == ["response", "revisit", "revisit"]
    first, same, not_modified = (r["headers"] for r in mains)
    assert same["WARC-Profile"] == IDENTICAL
    assert same["WARC-Payload-Digest"] == first["WARC-Payload-Digest"]
    assert same["WARC-Refers-To-Target-URI"] == URL
    assert same["WARC-Refers-To-Date"] == first["WARC-Date"]
    assert not_modified["WARC-Profile"] == NOT_MODIFIED
    assert not_modified["WARC-Refers-To-Date"] == first["WARC-Date"]
    assert mains[1]["payload"] == b""
    assert mains[2]["payload"] == b""


def test_a_body_dropped_for_size_is_written_truncated_and_a_failure_is_not_a_response(tmp_path: Path) -> None:
    records = written(tmp_path, [page(body=None, body_dropped=True, body_bytes=12 << 20, links=[]),
                                 page(success=False, status_code=None, exception="timeout", links=[])])
    responses = [r for r in records if r["type"] == "response"]
    assert len(responses) == 1
    assert responses[0]["headers"]["WARC-Truncated"] == "length"
    assert responses[0]["payload"] == b""


def test_binary_bodies_are_written_as_sent_and_a_rendered_dom_is_metadata(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4
    records = written(tmp_path, [page(body=base64.b64encode(data).decode(), body_encoding="base64", links=[]),
                                 page(spiderid="render", body="<html>dom</html>", http_version=None)],
                      gzip_on=False)  # fmt: skip
    assert records[1]["payload"] == data
    dom = records[-2]
    assert dom["type"] == "metadata"
    assert dom["payload"] == b"<html>dom</html>"
    assert not [r for r in records[3:] if r["type"] in ("response", "request")]


def test_files_rotate_by_size_and_age_with_heritrix_names_and_cdxj_indexes(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    files = WarcFiles(tmp_path, Rotation(prefix="CRAWL", max_size=2000, max_age=60), "w1", clock=lambda: now[0])
    maker = RecordMaker(files.builder(), LastPayloads(0), [])
    noise = base64.b64encode(random.Random(35).randbytes(3000)).decode()
    files.write(maker.records(page(body=noise, body_encoding="base64")))  # type: ignore[arg-type]
    assert files.rotate_if_due() is not None  # by size: 3000 random bytes do not compress
    files.write(maker.records(page(url=URL + "?2", response_url=URL + "?2")))  # type: ignore[arg-type]
    assert files.rotate_if_due() is None
    now[0] += 61
    assert files.rotate_if_due() is not None  # by age
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len([n for n in names if n.endswith(".warc.gz")]) == 2
    assert all(n.startswith("CRAWL-20270115") and "~w1.warc.gz" in n for n in names)
    assert "-00000-" in names[0]
    assert "-00001-" in names[2]
    index = (tmp_path / (names[2] + ".cdxj")).read_text()
    assert '"url": "http://127.0.0.1:8181/a.html?2"' in index
    assert '"status": "200"' in index


def test_a_killed_writers_file_is_cut_after_its_last_whole_record_and_closed(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, Rotation(), "w1")
    maker = RecordMaker(files.builder(), LastPayloads(0), [])
    for i in range(3):
        files.write(maker.records(page(url=f"{URL}?{i}", response_url=f"{URL}?{i}", body="b" * 3000)))  # type: ignore[arg-type]
    files.sync()
    assert files.path is not None
    open_path = Path(str(files.path) + ".open")
    whole, count = complete_end(open_path)
    assert (whole, count) == (open_path.stat().st_size, 10)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    cut = crashed / open_path.name
    cut.write_bytes(open_path.read_bytes()[:-150])  # the last record half written
    assert recover(tmp_path) == []  # a live writer holds its file: left alone
    closed = recover(crashed)
    assert [p.name for p in closed] == [open_path.name[: -len(".open")]]
    with open(closed[0], "rb") as stream:
        assert len(list(ArchiveIterator(stream))) == 9
    with gzip.open(closed[0]) as stream:
        assert stream.read()  # every member whole
    assert (crashed / (closed[0].name + ".cdxj")).exists()
    files.close()


def test_the_index_made_while_writing_is_the_one_cdxj_indexer_makes_from_the_file(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, Rotation(), "w1")
    maker = RecordMaker(files.builder(), LastPayloads(10), ["render"])
    pages = [page(), page(fetch_time="2026-11-27T21:00:00.000000"),
             page(status_code=304, status_msg="Not Modified", body="", fetch_time="2026-11-28T21:00:00.000000"),
             page(url=URL + "?big", response_url=URL + "?big", body=None, body_dropped=True, body_bytes=1 << 24),
             page(url=URL + "?dom", response_url=URL + "?dom", spiderid="render", http_version=None),
             page(url="http://127.0.0.1:8181/b.pdf", response_url="http://127.0.0.1:8181/b.pdf",
                  response_headers={"Content-Type": ["application/pdf"]}, raw_response_headers=None,
                  body=base64.b64encode(b"%PDF-1.4 x").decode(), body_encoding="base64")]  # fmt: skip
    for one in pages:
        files.write(maker.records(one))  # type: ignore[arg-type]
    closed = files.close()
    assert closed is not None
    ours = (tmp_path / (closed.name + ".cdxj")).read_text()
    again = tmp_path / "again"
    again.mkdir()
    theirs = index(closed.rename(again / closed.name)).read_text()  # cdxj-indexer reading the file
    assert ours == theirs
    assert len(ours.splitlines()) == 6  # response, two revisits, truncated response, DOM, pdf (outlinks not indexed)


def test_a_message_of_odd_shape_is_skipped_and_the_next_page_archived(tmp_path: Path) -> None:
    """No single message stops the writer (DESIGN.md): the warc loop's own write, no Kafka needed."""
    files = WarcFiles(tmp_path, Rotation(), "w1")
    archiver = Archiver(Settings.load(environ={}), consumer=None, files=files)  # type: ignore[arg-type]
    odd = [b"not json", b"[1, 2]", json.dumps(page(raw_response_headers=[["only-a-name"]])).encode(),
           json.dumps(page(links="nope", url=URL + "?x", response_url=URL + "?x")).encode(),
           json.dumps(page(url=URL + "?ok", response_url=URL + "?ok")).encode()]  # fmt: skip
    archiver.write([SimpleNamespace(topic="t", partition=0, offset=i, value=v) for i, v in enumerate(odd)])  # type: ignore[misc]
    closed = files.close()
    assert closed is not None
    assert archiver.skipped == 3
    with open(closed, "rb") as stream:
        responses = [r for r in ArchiveIterator(stream) if r.rec_type == "response"]
        urls = [r.rec_headers.get_header("WARC-Target-URI") for r in responses]
    assert urls == [URL + "?x", URL + "?ok"]  # links of the wrong type: archived without outlinks


def hop(url: str, status: int, target: str, fetch_time: str) -> dict[str, object]:
    """A `redirects` entry as the crawler sends it (crawler.page.hop_message)."""
    return {"url": url, "method": "GET", "status_code": status, "status_msg": "Moved",
            "response_headers": {"Location": [target], "Content-Type": ["text/html"]},
            "request_headers": {"Accept": ["*/*"]}, "http_version": "HTTP/1.1", "remote_address": "127.0.0.2",
            "fetch_time": fetch_time, "body": base64.b64encode(b"<a href=x>moved</a>").decode(),
            "body_encoding": "base64"}  # fmt: skip


def test_each_redirect_hop_is_a_response_and_its_request_in_order_before_the_page(tmp_path: Path) -> None:
    first, second = "http://127.0.0.1:8181/seed", "http://127.0.0.1:8181/moved"
    hops = [hop(first, 301, second, "2026-11-26T20:59:59.000001"), hop(second, 307, URL, "2026-11-26T20:59:59.500000")]
    records = written(tmp_path, [page(url=first, redirects=hops)])
    assert [(r["type"], r["headers"]["WARC-Target-URI"]) for r in records[1:6]] == [
        ("response", first), ("request", first), ("response", second), ("request", second), ("response", URL)]
    for response, request in ((records[1], records[2]), (records[3], records[4])):
        assert request["headers"]["WARC-Concurrent-To"] == response["headers"]["WARC-Record-ID"]
        assert response["headers"]["WARC-IP-Address"] == "127.0.0.2"
        assert response["payload"] == b"<a href=x>moved</a>"
    assert records[1]["http"].get_statuscode() == "301"
    assert records[1]["http"].get_header("Location") == second
    assert records[1]["headers"]["WARC-Date"] == "2026-11-26T20:59:59.000001Z"
    assert records[3]["http"].get_statuscode() == "307"
    assert records[3]["headers"]["WARC-Date"] == "2026-11-26T20:59:59.500000Z"


def test_a_text_payload_is_the_bytes_served_with_its_byte_order_mark(tmp_path: Path) -> None:
    utf16 = "<p>naïve</p>".encode("utf-16-le")
    records = written(tmp_path, [page(body_bom=base64.b64encode(b"\xef\xbb\xbf").decode(), links=[]),
                                 page(url=URL + "?16", response_url=URL + "?16", body="<p>naïve</p>",
                                      encoding="utf-16-le", body_bom=base64.b64encode(b"\xff\xfe").decode())])
    responses = [r for r in records if r["type"] == "response"]
    assert responses[0]["payload"] == b"\xef\xbb\xbf" + "<p>héllo</p>".encode()
    assert responses[1]["payload"] == b"\xff\xfe" + utf16
    assert responses[1]["headers"]["WARC-Payload-Digest"] == sha1_digest(b"\xff\xfe" + utf16)


def test_every_request_record_is_an_http_request_with_its_version(tmp_path: Path) -> None:
    records = written(tmp_path, [page(url=URL + "?q=1", response_url=URL + "?q=1", http_version="HTTP/1.0")])
    request = records[2]
    assert request["type"] == "request"
    http = request["http"]
    assert f"{http.protocol} {http.statusline}" == "GET /a.html?q=1 HTTP/1.0"
    raw = http.to_bytes()
    assert raw.startswith(b"GET /a.html?q=1 HTTP/1.0\r\nHost: 127.0.0.1:8181\r\nAccept: */*\r\n\r\n")


def test_header_values_are_written_as_the_bytes_received_not_percent_encoded(tmp_path: Path) -> None:
    """The crawler reads header bytes as Latin-1: b"caf\\xe9" arrives as "café", UTF-8 bytes as "cafÃ©"."""
    lines = [["Content-Type", "text/html"], ["X-Latin", "café"], ["X-Utf8", "cafÃ©"], ["X-Twice", "1"],
             ["X-Other", "o"], ["X-Twice", "2"]]  # fmt: skip
    written(tmp_path, [page(raw_response_headers=lines, response_headers={"Content-Type": ["text/html"]},
                            links=[])], gzip_on=False)  # fmt: skip
    data = next(tmp_path.glob("*.warc")).read_bytes()
    block = data[data.index(b"HTTP/1.1 200 OK\r\n"):].split(b"\r\n\r\n", 1)[0]
    assert block.split(b"\r\n")[1:] == [b"Content-Type: text/html", b"X-Latin: caf\xe9", b"X-Utf8: caf\xc3\xa9",
                                        b"X-Twice: 1", b"X-Other: o", b"X-Twice: 2", b"Content-Length: 13"]


def test_a_robots_txt_message_is_a_response_and_its_request(tmp_path: Path) -> None:
    """The robots_firehose message (crawler.page.robots_message): a page message's answer fields."""
    robots = "http://127.0.0.1:8181/robots.txt"
    body = b"User-agent: *\nDisallow: /private/\n"
    message = {"url": robots, "response_url": robots, "method": "GET", "status_code": 200, "status_msg": "OK",
               "response_headers": {"Content-Type": ["text/plain"]}, "request_headers": {},
               "http_version": "HTTP/1.1", "remote_address": "127.0.0.1", "fetch_time": "2026-11-26T20:59:58.0",
               "body": base64.b64encode(body).decode(), "body_encoding": "base64", "success": True,
               "worker": "h:1", "timestamp": "2026-11-26T20:59:59"}  # fmt: skip
    records = written(tmp_path, [message])
    assert [(r["type"], r["headers"]["WARC-Target-URI"]) for r in records[1:]] == [("response", robots),
                                                                                   ("request", robots)]
    assert records[1]["payload"] == body


def test_a_redirect_chain_that_failed_leaves_the_hops_it_received(tmp_path: Path) -> None:
    first = "http://127.0.0.1:8181/loop"
    failed = page(url=first, success=False, status_code=None, exception="max redirections reached", links=[],
                  redirects=[hop(first, 302, first, "2026-11-26T20:59:59.000001")])  # fmt: skip
    records = written(tmp_path, [failed])
    assert [(r["type"], r["headers"]["WARC-Target-URI"]) for r in records[1:]] == [("response", first),
                                                                                   ("request", first)]


def test_the_robots_topic_keeps_pages_as_long_as_the_crawled_firehose() -> None:
    settings = Settings.load(environ={})
    firehose = topic_configs(settings, settings.topic("crawled_firehose"))
    assert topic_configs(settings, settings.topic("robots_firehose")) == firehose
    assert "retention.ms" in firehose


def test_an_extracted_page_s_metadata_record_carries_its_text_digest_and_simhash(tmp_path: Path) -> None:
    text = "Héllo, main text."
    records = written(tmp_path, [page(text=text, simhash="0123456789abcdef", links=[])])
    assert [r["type"] for r in records] == ["warcinfo", "response", "request", "metadata"]
    assert records[3]["payload"] == (f"extracted-text-digest: {sha1_digest(text.encode())}\r\n"
                                     "extracted-text-simhash: 0123456789abcdef\r\n").encode()  # fmt: skip
    assert records[3]["headers"]["WARC-Concurrent-To"] == records[1]["headers"]["WARC-Record-ID"]
