"""Serve a generated :class:`Site` over HTTP/1.1 on each of its loopback addresses.

Stdlib only and built for load: a raw ``asyncio.Protocol`` with keep-alive and pipelining, response
headers rendered once at start, no per-request logging unless an access log file is asked for, so
benchmarks measure the crawler and not this server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from utils.demosite.changing import ChangingPages
from utils.demosite.generator import HTML_TYPE, NOT_FOUND_BODY, Site
from utils.demosite.sitemaps import SitemapSet

MAX_HEAD_BYTES = 65536
SERVED_METHODS = frozenset({"GET", "HEAD", "POST"})
REASONS = {
    200: "OK",
    304: "Not Modified",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True, slots=True)
class _Response:
    """Pre-rendered answer: ``head`` is every header line but Connection and the blank line."""

    status: int
    head: bytes
    body: bytes

    @classmethod
    def build(cls, status: int, content_type: str, body: bytes, extra: str = "") -> _Response:
        reason = REASONS.get(status, "Status")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nServer: shoal-demosite\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}"
        ).encode("latin-1")
        return cls(status, head, body)

    def render(self, send_body: bool, connection: bytes) -> bytes:
        """Full bytes on the wire; ``connection`` is a Connection header line or empty."""
        return self.head + connection + b"\r\n" + (self.body if send_body else b"")


def _error_response(status: int, extra: str = "") -> _Response:
    reason = REASONS.get(status, "Error")
    body = (
        NOT_FOUND_BODY
        if status == 404
        else (
            f"<!DOCTYPE html>\n<html><head><title>{status} {reason}</title></head>"
            f"<body><h1>{reason}</h1></body></html>\n"
        ).encode()
    )
    return _Response.build(status, HTML_TYPE, body, extra)


NOT_FOUND = _error_response(404)
NOT_ALLOWED = _error_response(405, "Allow: GET, HEAD, POST\r\n")


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    target: str
    host: str
    http11: bool
    keep_alive: bool
    expects_continue: bool
    body_length: int
    validators: tuple[str, str] = ("", "")  # If-None-Match, If-Modified-Since (the sitemaps answer 304)

    @property
    def connection_header(self) -> bytes:
        """Connection line of the answer: none for HTTP/1.1 keep-alive, the default there."""
        if not self.keep_alive:
            return b"Connection: close\r\n"
        return b"" if self.http11 else b"Connection: keep-alive\r\n"


class _ParseError(Exception):
    """A request this server answers with ``status`` and then closes the connection."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _parse_head(head: bytes) -> _Request:
    """Parse a request line and headers; chunked request bodies are not supported (501)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _ParseError(400)
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise _ParseError(400)
        headers[name.strip().lower()] = value.strip()
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        raise _ParseError(501)
    connection = headers.get(b"connection", b"").lower()
    http11 = parts[2] == b"HTTP/1.1"
    keep_alive = b"close" not in connection if http11 else b"keep-alive" in connection
    try:
        length = int(headers.get(b"content-length", b"0"))
    except ValueError:
        raise _ParseError(400) from None
    return _Request(
        method=parts[0].decode("latin-1"),
        target=parts[1].decode("latin-1"),
        host=headers.get(b"host", b"").decode("latin-1"),
        http11=http11,
        keep_alive=keep_alive,
        expects_continue=headers.get(b"expect", b"").lower() == b"100-continue",
        body_length=max(length, 0),
        validators=(
            headers.get(b"if-none-match", b"").decode("latin-1"),
            headers.get(b"if-modified-since", b"").decode("latin-1"),
        ),
    )


class SiteServer:
    """HTTP server for a site, one listening socket per host address at the site's port.

    ``delay`` (seconds) holds back every response to simulate latency; ``fail_paths`` (path ->
    status, read at request time so tests may change it while serving) and ``extra_routes`` (path ->
    (status, content type, body[, more header lines, each ending in CRLF])) apply to every host and
    win over the site's own pages, in that order. ``hits`` counts requests per (host:port, path).
    """

    def __init__(
        self,
        site: Site,
        *,
        delay: float = 0.0,
        fail_paths: dict[str, int] | None = None,
        extra_routes: dict[str, tuple[int, str, bytes] | tuple[int, str, bytes, str]] | None = None,
        access_log: Path | None = None,
        sitemaps: SitemapSet | None = None,
        changing: ChangingPages | None = None,
    ) -> None:
        self.site = site
        self.changing = changing  # pages that change over time, with ETag/Last-Modified/304 (issue 31)
        self.sitemaps = sitemaps  # answered before the site's pages (utils/demosite/sitemaps.py)
        self.delay = delay
        self.fail_paths: dict[str, int] = dict(fail_paths or {})
        self.access_log = access_log
        self.hits: Counter[tuple[str, str]] = Counter()
        self._routes = _site_routes(site)
        self._extra = {path: _Response.build(*route) for path, route in (extra_routes or {}).items()}
        self._labels = {host.rsplit(":", 1)[0]: host for host in site.hosts}
        self._servers: list[asyncio.Server] = []
        self._connections: set[_HttpProtocol] = set()
        self._log_file: IO[str] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Bind every host address; raises OSError (and binds nothing) if one is taken."""
        loop = asyncio.get_running_loop()
        try:
            for ip in self._labels:
                server = await loop.create_server(
                    lambda: _HttpProtocol(self), ip, self.site.port, reuse_address=True, backlog=1024
                )
                self._servers.append(server)
        except OSError:
            await self.close()
            raise
        if self.access_log is not None:
            self._log_file = self.access_log.open("a", encoding="utf-8", buffering=1)

    async def close(self) -> None:
        """Stop listening, drop open keep-alive connections and close the access log."""
        for server in self._servers:
            server.close()
        for connection in list(self._connections):
            connection.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    async def serve_forever(self) -> None:
        """Serve until the calling task is cancelled."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    def start_in_thread(self) -> None:
        """Serve from a daemon thread with its own event loop; returns once every socket listens."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        errors: list[Exception] = []
        self._thread = threading.Thread(
            target=self._run_loop, args=(loop, ready, errors), name="demosite", daemon=True
        )
        self._thread.start()
        ready.wait()
        if errors:
            self._thread.join()
            self._thread = None
            raise errors[0]
        self._loop = loop

    def _run_loop(
        self, loop: asyncio.AbstractEventLoop, ready: threading.Event, errors: list[Exception]
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.start())
        except Exception as exc:  # handed to the starting thread, which re-raises it
            errors.append(exc)
        ready.set()
        if not errors:
            loop.run_forever()
            loop.run_until_complete(self.close())
        loop.close()

    def stop(self) -> None:
        """Stop a server started by :meth:`start_in_thread`; safe to call twice."""
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop = None
        self._thread = None

    def __enter__(self) -> SiteServer:
        """Start in a thread, for ``with SiteServer(site):`` in tests."""
        self.start_in_thread()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop the thread started by ``__enter__``."""
        self.stop()

    def _answer(self, request: _Request, local_ip: str, client_ip: str) -> _Response:
        """Pick the answer for one request and account for it in ``hits`` and the access log."""
        ip = request.host.rsplit(":", 1)[0] if request.host else local_ip
        if ip not in self._labels:
            ip = local_ip
        path = _path_of(request.target)
        response = self._route(ip, path) if request.method in SERVED_METHODS else NOT_ALLOWED
        found = self.sitemaps.answer(path, *request.validators) if self.sitemaps is not None else None
        if found is None and self.changing is not None:
            found = self.changing.answer(path, *request.validators)
        if found is not None:
            response = _Response.build(*found)
        host = self._labels.get(ip, ip)
        self.hits[(host, path)] += 1
        if self._log_file is not None:
            self._log_file.write(f"{client_ip} {request.method} {host} {path} {response.status} {time.time():.6f}\n")
        return response

    def _route(self, ip: str, path: str) -> _Response:
        if self.fail_paths and path in self.fail_paths:
            return _error_response(self.fail_paths[path])
        extra = self._extra.get(path)
        if extra is not None:
            return extra
        return self._routes.get(ip, {}).get(path, NOT_FOUND)

    def _track(self, connection: _HttpProtocol, is_open: bool) -> None:
        """Remember open connections so :meth:`close` can drop idle keep-alive ones."""
        if is_open:
            self._connections.add(connection)
        else:
            self._connections.discard(connection)


def _site_routes(site: Site) -> dict[str, dict[str, _Response]]:
    """Pre-render every page's headers, keyed by host IP and then by path."""
    routes: dict[str, dict[str, _Response]] = {}
    for url, page in site.pages.items():
        parts = urlsplit(url)
        routes.setdefault(parts.hostname or "", {})[parts.path] = _Response.build(
            page.status, page.content_type, page.body
        )
    return routes


def _path_of(target: str) -> str:
    """Path of a request target; absolute-form targets (as sent to proxies) are reduced to it."""
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return target


class _HttpProtocol(asyncio.Protocol):
    """One client connection: parses pipelined requests, answers them in order."""

    def __init__(self, server: SiteServer) -> None:
        self._server = server
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._local_ip = ""
        self._client_ip = ""
        self._closing = False
        self._pending: deque[tuple[float, bytes, bool]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._local_ip = transport.get_extra_info("sockname")[0]
        self._client_ip = transport.get_extra_info("peername")[0]
        self._server._track(self, True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._track(self, False)
        if self._timer is not None:
            self._timer.cancel()
        self._transport = None

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def pause_writing(self) -> None:
        """Stop reading while a pipelining client is not reading its answers (backpressure)."""
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while not self._closing and self._next_request():
            pass

    def _next_request(self) -> bool:
        """Answer the first complete request in the buffer; False when more bytes are needed."""
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                self._send(_error_response(431).render(True, b"Connection: close\r\n"), close=True)
            return False
        try:
            request = _parse_head(bytes(self._buffer[:end]))
        except _ParseError as exc:
            self._send(_error_response(exc.status).render(True, b"Connection: close\r\n"), close=True)
            return False
        total = end + 4 + request.body_length
        if len(self._buffer) < total:
            if request.expects_continue and len(self._buffer) == end + 4 and self._transport is not None:
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        del self._buffer[:total]
        response = self._server._answer(request, self._local_ip, self._client_ip)
        response_bytes = response.render(request.method != "HEAD", request.connection_header)
        self._send(response_bytes, close=not request.keep_alive)
        return True

    def _send(self, data: bytes, close: bool) -> None:
        """Write now, or ``delay`` seconds later, keeping responses in request order.

        A timer per connection rather than a task sleeping per request: same latency, no task churn.
        """
        self._closing = self._closing or close
        delay = self._server.delay
        if delay <= 0 and not self._pending:
            self._write(data, close)
            return
        loop = asyncio.get_running_loop()
        self._pending.append((loop.time() + delay, data, close))
        if self._timer is None:
            self._timer = loop.call_at(self._pending[0][0], self._flush)

    def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        while self._pending and self._pending[0][0] <= loop.time():
            _, data, close = self._pending.popleft()
            self._write(data, close)
        if self._pending:
            self._timer = loop.call_at(self._pending[0][0], self._flush)

    def _write(self, data: bytes, close: bool) -> None:
        if self._transport is None:
            return
        self._transport.write(data)
        if close:
            self._transport.close()
