"""Issue 35: a crawl archived as WARC/1.1 by the warc component, read back with warcio and replayed by pywb;
and a warc process killed with SIGKILL mid-stream loses no page and leaves no unreadable file: the next one,
sending its files to S3 (s3rver), uploads the killed writer's file too. Issue 44: every fetch as served
(redirect hops, robots.txt, byte-order marks, header bytes, request lines)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.support import pywb
from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.s3rver import KEY_ID, SECRET, s3rver
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.demosite.changing import ChangingPages
from utils.services import free_port
from warc.records import IDENTICAL, NOT_MODIFIED, sha1_digest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def archived(directory: Path) -> list[dict[str, Any]]:
    """Every record of every closed file (warcio reads each whole, digests checked)."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, check_digests="raise"):
                out.append({"file": path.name, "type": record.rec_type, "headers": dict(record.rec_headers.headers),
                            "status": record.http_headers.get_statuscode() if record.http_headers else None,
                            "http": {k.lower(): v for k, v in record.http_headers.headers} if record.http_headers
                            else {},
                            "payload": record.content_stream().read()})  # fmt: skip
    return out


def by_url(records: list[dict[str, Any]], *types: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if record["type"] in types:
            found[record["headers"]["WARC-Target-URI"]].append(record)
    return found


def warc_env(cluster: TestCluster, directory: Path, **more: str) -> None:
    values = {"WARC_DIR": str(directory), "WARC_GROUP": f"{cluster.prefix}-warc", "WARC_MAX_AGE": "1",
              "KAFKA_CONSUMER_TIMEOUT": "100", **more}  # fmt: skip
    cluster.env.update({f"SHOAL_{k}": v for k, v in values.items()})


def crawl(cluster: TestCluster, seeds: list[str], crawlid: str) -> None:
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic,
            [{"url": seed, "appid": "warcapp", "crawlid": crawlid, "maxdepth": 10, "deny_extensions": []}
             for seed in seeds])  # fmt: skip


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}], indirect=True)
def test_a_crawl_is_archived_read_back_by_warcio_and_replayed_by_pywb(cluster: TestCluster, tmp_path: Path) -> None:
    pywb.wayback()  # built before the crawl when make install-test has not
    site = generate_site(hosts=1, pages_per_host=25, seed=35, base_ip_octet=35, port=free_port())
    pages = ChangingPages(site.hosts[0], [0.0])  # one page that never changes, with ETag and 304 (issue 31)
    fresh = pages.url(0)
    directory = tmp_path / "warc"
    warc_env(cluster, directory)
    with SiteServer(site, changing=pages):
        seeds = site.seed_urls()
        expected = set(site.reachable(seeds, 10, obey_robots=True))
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        warc = cluster.start("warc")
        crawl(cluster, [*seeds, fresh], "first")
        wait_until(lambda: set(by_url(archived(directory), "response")) >= expected | {fresh}, 150)
        first = by_url(archived(directory), "response")
        crawl(cluster, seeds, "second")  # the same bytes again: revisits, not copies
        wait_until(lambda: sum(len(v) for v in by_url(archived(directory), "response", "revisit").values())
                   >= 2 * len(expected), 150)  # fmt: skip
        # The page asked for again with its validators, as `shoal revisit` asks (keep-data-fresh.md): a real 304.
        etag = first[fresh][0]["http"]["etag"]
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic,
                [{"url": fresh, "appid": "warcapp", "crawlid": "first", "maxdepth": 0, "refetch": True,
                  "headers": {"If-None-Match": etag}}])  # fmt: skip
        wait_until(lambda: any(r["status"] == "304" for r in archived(directory)), 60)
        assert warc.stop() == 0
    assert not list(directory.glob("*.open"))
    records = archived(directory)
    requests = by_url(records, "request")
    ok = [url for url in expected if site.pages[url].status == 200]
    for url in expected:
        served = site.pages[url]
        response = first[url][0]
        assert response["status"] == str(served.status), url
        assert response["payload"] == served.body, url
        assert response["headers"]["WARC-Payload-Digest"] == sha1_digest(served.body), url
        assert response["headers"]["WARC-IP-Address"] == "127.0.0.35"
        assert requests[url], url
    revisits = by_url(records, "revisit")
    for url in ok:
        (again,) = [r for r in revisits[url] if r["status"] == "200"]
        assert again["headers"]["WARC-Profile"] == IDENTICAL
        assert again["headers"]["WARC-Refers-To-Date"] == first[url][0]["headers"]["WARC-Date"]
    assert pages.answers[304] == 1  # the server itself answered Not Modified, once
    (not_modified,) = [r for r in records if r["status"] == "304"]
    assert not_modified["type"] == "revisit"
    assert not_modified["headers"]["WARC-Target-URI"] == fresh
    assert not_modified["headers"]["WARC-Profile"] == NOT_MODIFIED
    assert not_modified["headers"]["WARC-Refers-To-Target-URI"] == fresh
    assert not_modified["headers"]["WARC-Refers-To-Date"] == first[fresh][0]["headers"]["WARC-Date"]
    assert not_modified["http"]["etag"] == etag
    links = [r for r in records if r["type"] == "metadata" and r["payload"].startswith(b"outlink: ")]
    assert links

    # pywb replays the archive from the warc component's own CDXJ indexes.
    html = [url for url in ok if site.pages[url].content_type.startswith("text/html")][:3]
    assert len(html) == 3
    with pywb.replaying(tmp_path / "replay", sorted(directory.glob("*.warc.gz"))) as replay:
        for url in html:
            answer = replay(url, first[url][0]["headers"]["WARC-Date"])
            assert answer.status_code == 200, url
            assert answer.content == site.pages[url].body, url


def test_a_warc_process_killed_mid_stream_leaves_every_page_in_a_closed_readable_file(
    cluster: TestCluster, tmp_path: Path
) -> None:
    directory = tmp_path / "warc"
    warc_env(cluster, directory, WARC_BATCH="5", WARC_MAX_AGE="3600")
    firehose = cluster.settings.topic("crawled_firehose")
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    pages = [_page(i) for i in range(400)]
    first = cluster.start("warc")
    produce(bootstrap, firehose, pages[:200])
    wait_until(lambda: any(p.stat().st_size > 20_000 for p in directory.glob("*.open")), 60)
    first.kill()  # SIGKILL: an open file, records past the last commit, perhaps one half written
    first.process.wait(10)
    produce(bootstrap, firehose, pages[200:])
    # The next process sends its files to S3 (s3rver): the killed writer's, once cut and closed, and its own.
    server = s3rver(tmp_path / "s3", "archive")
    server.start()
    try:
        server.wait_ready(60)
        secrets = tmp_path / "s3-credentials"
        secrets.write_text(f"[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n")
        cluster.env.update({"SHOAL_WARC_S3_BUCKET": "archive", "SHOAL_WARC_S3_PREFIX": "crawl/",
                            "SHOAL_WARC_S3_ENDPOINT_URL": f"http://{server.address}",
                            "SHOAL_WARC_S3_REGION": "us-east-1", "SHOAL_WARC_S3_CREDENTIALS_FILE": str(secrets)})
        burst = cluster.start("warc", "--burst")
        assert burst.process.wait(120) == 0
        assert list(directory.iterdir()) == []  # every file uploaded, confirmed, then removed
        uploaded = tmp_path / "uploaded"
        uploaded.mkdir()
        bucket = boto3.client("s3", endpoint_url=f"http://{server.address}", region_name="us-east-1",
                              aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)  # fmt: skip
        for item in bucket.list_objects_v2(Bucket="archive", Prefix="crawl/")["Contents"]:
            bucket.download_file("archive", item["Key"], str(uploaded / item["Key"].removeprefix("crawl/")))
    finally:
        server.stop()
    log = burst.log_path.read_text()
    assert "WARC file of a stopped writer closed" in log  # the killed writer's file
    assert "WARC upload failed" not in log
    directory = uploaded
    records = archived(directory)
    responses = by_url(records, "response")
    assert set(responses) == {page["url"] for page in pages}
    for url, copies in responses.items():  # a replayed batch: whole records of the same fetch
        assert len({(c["headers"]["WARC-Date"], c["headers"]["WARC-Payload-Digest"]) for c in copies}) == 1, url
    for path in directory.glob("*.warc.gz"):
        assert path.with_name(path.name + ".cdxj").stat().st_size > 0


def _page(i: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:9/page-{i}.html"
    return {"url": url, "response_url": url, "status_code": 200, "status_msg": "OK", "success": True,
            "response_headers": {"Content-Type": ["text/html"]}, "request_headers": {},
            "body": f"<html><body>page {i} " + "lorem ipsum " * 300 + "</body></html>", "encoding": "utf-8",
            "links": [], "appid": "a", "crawlid": "c", "spiderid": "link", "http_version": "HTTP/1.1",
            "remote_address": "127.0.0.1", "fetch_time": f"2026-11-26T10:00:{i % 60:02d}.{i:06d}",
            "timestamp": "2026-11-26T10:01:00"}  # fmt: skip


HOPS = ((301, "/hop/301"), (302, "/hop/302"), (303, "/hop/303"), (307, "/hop/307"), (308, "/hop/308"))
END = b"<!DOCTYPE html>\n<html><body><p>the end of the chain</p></body></html>\n"
BOM_UTF8 = b"\xef\xbb\xbf" + "<!DOCTYPE html>\n<html><body><p>café served with a BOM</p></body></html>\n".encode()
UTF16 = "\ufeff<!DOCTYPE html>\n<html><body><p>naïve UTF-16</p></body></html>\n".encode("utf-16-le")
HEADERS = b"<!DOCTYPE html>\n<html><body><p>headers</p></body></html>\n"


def fidelity_routes() -> dict[str, tuple[int, str, bytes, str]]:
    """A 301 -> 302 -> 303 -> 307 -> 308 chain, BOM'd UTF-8 and UTF-16 pages, repeated and non-ASCII headers."""
    routes = {path: (status, "text/html", f"<a href='{target}'>moved</a>".encode(), f"Location: {target}\r\n")
              for (status, path), target in zip(HOPS, [p for _, p in HOPS[1:]] + ["/hop/end.html"], strict=True)}
    routes["/hop/end.html"] = (200, "text/html; charset=utf-8", END, "")
    routes["/bom.html"] = (200, "text/html; charset=utf-8", BOM_UTF8, "")
    routes["/utf16.html"] = (200, "text/html; charset=utf-16", UTF16, "")
    more = "X-Twice: one\r\nX-Other: x\r\nX-Twice: two\r\nX-Name: café\r\n"  # é: one Latin-1 byte on the wire
    routes["/headers.html"] = (200, "text/html", HEADERS, more)
    return routes  # fmt: skip


def blocks(directory: Path) -> list[dict[str, Any]]:
    """Every record of the closed files in order, its HTTP block as raw bytes (not parsed by warcio)."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, ensure_http_headers=False, no_record_parse=True):
                out.append({"type": record.rec_type, "headers": dict(record.rec_headers.headers),
                            "block": record.raw_stream.read()})  # fmt: skip
    return out


def test_redirect_hops_robots_txt_boms_and_header_bytes_are_archived_as_served(
    cluster: TestCluster, tmp_path: Path
) -> None:
    """Default settings; a 301..308 chain, robots.txt, BOM'd pages and odd headers, each as served."""
    site = generate_site(hosts=4, pages_per_host=2, seed=44, base_ip_octet=44, port=free_port())
    directory = tmp_path / "warc"
    warc_env(cluster, directory)
    seeds = [f"http://{site.hosts[0]}/hop/301", f"http://{site.hosts[1]}/bom.html",
             f"http://{site.hosts[2]}/utf16.html", f"http://{site.hosts[3]}/headers.html"]  # fmt: skip
    end = f"http://{site.hosts[0]}/hop/end.html"
    robots = [f"http://{host}/robots.txt" for host in site.hosts]
    with SiteServer(site, extra_routes=fidelity_routes()):  # type: ignore[arg-type]
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        warc = cluster.start("warc")
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic,
                [{"url": seed, "appid": "warcapp", "crawlid": "fidelity"} for seed in seeds])  # fmt: skip
        wanted = {end, *seeds[1:], *robots}
        wait_until(lambda: set(by_url(archived(directory), "response")) >= wanted, 150)
        assert warc.stop() == 0
    records = archived(directory)  # warcio reads every record, digests checked
    responses, requests = by_url(records, "response"), by_url(records, "request")

    # Every hop of the chain is a response with its request, in order, before the page it led to.
    chain = [f"http://{site.hosts[0]}{path}" for _, path in HOPS]
    for (status, _), url in zip(HOPS, chain, strict=True):
        (hop,) = responses[url]
        assert hop["status"] == str(status), url
        assert hop["http"]["location"].startswith("/hop/"), url
        assert requests[url], url
    order = [r["headers"]["WARC-Target-URI"] for r in records if r["type"] == "response"]
    assert [u for u in order if u in (*chain, end)] == [*chain, end]
    assert responses[end][0]["payload"] == END

    # The payload is the bytes served, byte-order mark included; the digest is of those bytes.
    for url, served in ((seeds[1], BOM_UTF8), (seeds[2], UTF16)):
        assert responses[url][0]["payload"] == served, url
        assert responses[url][0]["headers"]["WARC-Payload-Digest"] == sha1_digest(served), url

    # robots.txt answers are archived, with their requests.
    for url in robots:
        assert responses[url][0]["payload"] == site.pages[url].body, url
        assert requests[url], url

    # Repeated headers in their order; a non-ASCII value as the bytes received (not percent-encoded).
    raw = {r["headers"]["WARC-Target-URI"]: r["block"] for r in blocks(directory) if r["type"] == "response"}
    head = raw[seeds[3]].split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    assert [line for line in head if line.startswith(b"X-Twice:")] == [b"X-Twice: one", b"X-Twice: two"]
    assert b"X-Name: caf\xe9" in head

    # Every request record's block is an HTTP request: request line with its version, then header lines.
    for record in blocks(directory):
        if record["type"] == "request":
            lines = record["block"].split(b"\r\n")
            assert re.fullmatch(rb"GET /\S* HTTP/1\.1", lines[0]), lines[0]
            assert all(re.fullmatch(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+: .*", line) for line in lines[1:-2]), lines
            assert lines[-2:] == [b"", b""]

    # pywb replays the seed that redirects: through every hop to the page (`mp_`: pywb rewrites each
    # Location into the archive; `id_` serves the records as they are, Location too).
    with pywb.replaying(tmp_path / "replay", sorted(directory.glob("*.warc.gz"))) as replay:
        answer = replay(seeds[0], responses[chain[0]][0]["headers"]["WARC-Date"])
        assert answer.status_code == 301
        assert answer.headers["location"] == "/hop/302"
        followed = httpx.get(str(answer.url).replace("id_/", "mp_/"), follow_redirects=True, timeout=10)
        assert [r.status_code for r in followed.history] == [s for s, _ in HOPS]
        assert followed.status_code == 200
        assert str(followed.url).endswith(f"mp_/{end}")
        assert httpx.get(str(followed.url).replace("mp_/", "id_/"), timeout=10).content == END
