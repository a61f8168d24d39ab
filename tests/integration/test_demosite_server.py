"""The demo site server over real loopback sockets: statuses, types, keep-alive, accounting, faults."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from utils.demosite import PDF_PATH, Site, SiteServer, generate_site

BASE_OCTET = 90  # away from `make run`'s 127.0.0.10.. so a running demo never collides with tests
REPO = Path(__file__).resolve().parents[2]

StartServer = Callable[..., tuple[Site, SiteServer]]


def free_port(ip: str = f"127.0.0.{BASE_OCTET}") -> int:
    """Return a port the kernel just handed out on ``ip``; the site binds it on every host address."""
    with socket.socket() as sock:
        sock.bind((ip, 0))
        port: int = sock.getsockname()[1]
        return port


def fetch(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, str, bytes]:
    """Status, Content-Type and body of one request, 4xx/5xx included."""
    try:
        with urlopen(Request(url, data=data, method=method), timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except HTTPError as exc:
        with exc:
            return exc.code, exc.headers["Content-Type"], exc.read()


@pytest.fixture
def start_server() -> Iterator[StartServer]:
    """Start servers with custom options, each on a fresh port, and stop them all afterwards."""
    servers: list[SiteServer] = []

    def start(hosts: int = 2, pages: int = 20, **options: Any) -> tuple[Site, SiteServer]:
        site = generate_site(hosts=hosts, pages_per_host=pages, base_ip_octet=BASE_OCTET, port=free_port())
        server = SiteServer(site, **options)
        server.start_in_thread()
        servers.append(server)
        return site, server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Site, SiteServer]]:
    """Serve the default 3 × 200 site for the read-only tests of this module."""
    site = generate_site(base_ip_octet=BASE_OCTET, port=free_port())
    with SiteServer(site) as server:
        yield site, server


def test_full_crawl_matches_the_site(served: tuple[Site, SiteServer]) -> None:
    """Every URL reachable() promises answers with the generated status, type and bytes."""
    site, _ = served
    expected = site.reachable(site.seed_urls(), max_depth=len(site.pages), obey_robots=False)
    for url in expected:
        page = site.pages[url]
        assert fetch(url) == (page.status, page.content_type, page.body), url


def test_each_host_answers_on_its_own_address(served: tuple[Site, SiteServer]) -> None:
    """Dispatch by bound address: the same path gives each host's own page."""
    site, _ = served
    bodies = {fetch(url)[2] for url in site.seed_urls()}
    assert len(bodies) == len(site.hosts)


def test_host_header_wins_over_socket_address(served: tuple[Site, SiteServer]) -> None:
    """A known Host header picks the host; an unknown one falls back to the socket's address."""
    site, _ = served
    first, second = site.hosts[0], site.hosts[1]
    conn = http.client.HTTPConnection(first, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": second})
        assert conn.getresponse().read() == site.pages[f"http://{second}/"].body
        conn.request("GET", "/", headers={"Host": "localhost"})
        assert conn.getresponse().read() == site.pages[f"http://{first}/"].body
    finally:
        conn.close()


def test_unknown_path_is_html_404(served: tuple[Site, SiteServer]) -> None:
    """Paths the site never linked still get a proper HTML 404."""
    site, _ = served
    status, content_type, body = fetch(f"http://{site.hosts[0]}/no/such/page.html")
    assert (status, content_type) == (404, "text/html; charset=utf-8")
    assert b"Not Found" in body


def test_pdf_served_as_binary(served: tuple[Site, SiteServer]) -> None:
    """The non-HTML file keeps its type and exact bytes."""
    site, _ = served
    status, content_type, body = fetch(f"http://{site.hosts[1]}{PDF_PATH}")
    assert (status, content_type) == (200, "application/pdf")
    assert body.startswith(b"%PDF")
    assert body == site.pages[f"http://{site.hosts[1]}{PDF_PATH}"].body


def test_head_and_post(served: tuple[Site, SiteServer]) -> None:
    """HEAD gives GET's headers without a body; POST answers like GET."""
    site, _ = served
    url = f"http://{site.hosts[0]}/page/3.html"
    conn = http.client.HTTPConnection(site.hosts[0], timeout=5)
    try:
        conn.request("HEAD", "/page/3.html")
        resp = conn.getresponse()
        assert resp.status == 200
        assert int(resp.headers["Content-Length"]) == len(site.pages[url].body)
        assert resp.read() == b""
    finally:
        conn.close()
    assert fetch(url, method="POST", data=b"a=1&b=2")[2] == site.pages[url].body


def test_other_methods_rejected(served: tuple[Site, SiteServer]) -> None:
    """Methods a crawler never sends get 405 with an Allow header."""
    site, _ = served
    status, _, _ = fetch(f"http://{site.hosts[0]}/", method="DELETE")
    assert status == 405


def test_keep_alive_reuses_one_connection(served: tuple[Site, SiteServer]) -> None:
    """Many requests ride one socket, the property the load figures depend on."""
    site, _ = served
    conn = http.client.HTTPConnection(site.hosts[0], timeout=5)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
        sock = conn.sock
        for n in range(20):
            conn.request("GET", f"/page/{n}.html")
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.read()
        assert conn.sock is sock
    finally:
        conn.close()


def _raw_exchange(host: str, payload: bytes) -> bytes:
    """Send raw bytes and read until the server closes the connection."""
    ip, port = host.split(":")
    with socket.create_connection((ip, int(port)), timeout=5) as sock:
        sock.sendall(payload)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_pipelined_requests_answered_in_order(served: tuple[Site, SiteServer]) -> None:
    """Pipelined requests come back in order and Connection: close ends the connection."""
    site, _ = served
    host = site.hosts[0]
    payload = (
        f"GET /page/1.html HTTP/1.1\r\nHost: {host}\r\n\r\n"
        f"GET /page/2.html HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    ).encode()
    raw = _raw_exchange(host, payload)
    first = site.pages[f"http://{host}/page/1.html"].body
    second = site.pages[f"http://{host}/page/2.html"].body
    assert raw.index(first) < raw.index(second)
    assert raw.endswith(second)
    assert raw.count(b"HTTP/1.1 200 OK") == 2


def test_http10_closes_unless_keep_alive(served: tuple[Site, SiteServer]) -> None:
    """HTTP/1.0 without keep-alive gets one answer and a close."""
    site, _ = served
    raw = _raw_exchange(site.hosts[0], b"GET / HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in raw


def test_malformed_request_gets_400(served: tuple[Site, SiteServer]) -> None:
    """Garbage is answered and the connection closed, the server keeps serving."""
    site, _ = served
    assert _raw_exchange(site.hosts[0], b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert fetch(site.seed_urls()[0])[0] == 200


def test_hits_counted_per_host_and_path(served: tuple[Site, SiteServer]) -> None:
    """The hit counter tells tests how often a crawler requested each URL."""
    site, server = served
    key = (site.hosts[2], "/page/7.html")
    before = server.hits[key]
    for _ in range(3):
        fetch(f"http://{site.hosts[2]}/page/7.html")
    assert server.hits[key] == before + 3


def test_access_log_lines(start_server: StartServer, tmp_path: Path) -> None:
    """One `<client_ip> <method> <host> <path> <status> <arrival unix time>` line per request."""
    log = tmp_path / "access.log"
    site, server = start_server(access_log=log)
    fetch(f"http://{site.hosts[0]}/page/1.html")
    fetch(f"http://{site.hosts[1]}/missing.html", method="HEAD")
    server.stop()
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [line[1:5] for line in lines] == [
        ["GET", site.hosts[0], "/page/1.html", "200"],
        ["HEAD", site.hosts[1], "/missing.html", "404"],
    ]
    assert all(line[0].startswith("127.") for line in lines)
    assert 0 <= float(lines[1][5]) - float(lines[0][5]) < 30


def test_fail_paths_forced_and_changed_live(start_server: StartServer) -> None:
    """fail_paths forces statuses at start and can be changed while serving."""
    site, server = start_server(fail_paths={"/page/1.html": 503})
    base = f"http://{site.hosts[0]}"
    assert fetch(f"{base}/page/1.html")[0] == 503
    server.fail_paths["/page/2.html"] = 500
    assert fetch(f"{base}/page/2.html")[0] == 500
    del server.fail_paths["/page/1.html"]
    assert fetch(f"{base}/page/1.html")[0] == 200


def test_extra_routes_on_every_host(start_server: StartServer) -> None:
    """extra_routes adds the same answer to every host."""
    site, _ = start_server(extra_routes={"/healthz": (200, "text/plain", b"ok")})
    for host in site.hosts:
        assert fetch(f"http://{host}/healthz") == (200, "text/plain", b"ok")


def test_delay_adds_latency(start_server: StartServer) -> None:
    """The ``delay`` option holds back each answer by about that many seconds."""
    site, _ = start_server(delay=0.2)
    started = time.monotonic()
    assert fetch(site.seed_urls()[0])[0] == 200
    assert time.monotonic() - started >= 0.2


def test_port_in_use_raises(served: tuple[Site, SiteServer]) -> None:
    """A second server on the same addresses fails at start, not silently."""
    site, _ = served
    with pytest.raises(OSError, match="address already in use"):
        SiteServer(site).start_in_thread()


def test_stop_is_idempotent_and_frees_the_port(start_server: StartServer) -> None:
    """After stop the addresses can be bound again."""
    site, server = start_server()
    server.stop()
    server.stop()
    again = SiteServer(site)
    again.start_in_thread()
    try:
        assert fetch(site.seed_urls()[0])[0] == 200
    finally:
        again.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_announces_and_stops_on_signal(signum: signal.Signals) -> None:
    """`python -m utils.demosite` prints seeds and counts as JSON lines and exits 0 on a signal."""
    port = free_port()
    args = ["--hosts", "2", "--pages", "30", "--port", str(port), "--base-octet", str(BASE_OCTET)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "utils.demosite", *args], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = [json.loads(proc.stdout.readline()) for _ in range(3)]
        site = generate_site(hosts=2, pages_per_host=30, base_ip_octet=BASE_OCTET, port=port)
        assert [line["seed_url"] for line in lines[:2]] == site.seed_urls()
        assert lines[2]["expected_pages"] == site.expected_page_count()
        assert fetch(site.seed_urls()[1])[2] == site.pages[site.seed_urls()[1]].body
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
