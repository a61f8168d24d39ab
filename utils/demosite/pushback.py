"""Demo hosts that push back, legally (issue 33): what a crawler meets from sites defending themselves.

Each host of a `PushbackSite` serves a small chain of pages (`/`, `/p/1` ... `/p/N`, each linking
to the next two) and applies its own `Pushback` switches, per client address:
  rate_limit   more than `rate_limit` requests within `rate_window` seconds: 429 with Retry-After
  captcha      a client without a browser (no "Chrome" in its User-Agent) gets a CAPTCHA page:
               status 200, a tiny body carrying the marker `g-recaptcha`
  ban_burst    more than `ban_burst` requests within `ban_window` seconds: the address is banned
               with 403 for `ban_seconds`
Every answer is logged with its arrival time (`log`), so a test can check levels and spacing.
Stdlib asyncio, one listening socket per loopback host, `Connection: close` on every answer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field

CAPTCHA = b"<html><body><div class=\"g-recaptcha\" data-sitekey=\"demo\"></div></body></html>"
FILLER = "<p>" + "Fresh stock arrives every morning; prices include tax. " * 30 + "</p>"


@dataclass(frozen=True)
class Pushback:
    rate_limit: int = 0  # requests per rate_window from one client; 0 = no limit
    rate_window: float = 60.0  # seconds
    retry_after: int = 1  # seconds, sent with each 429
    captcha: bool = False
    ban_burst: int = 0  # requests per ban_window from one client before a ban; 0 = never
    ban_window: float = 1.0  # seconds
    ban_seconds: float = 5.0


@dataclass(frozen=True)
class Hit:
    at: float  # unix time the request arrived
    path: str
    status: int
    client: str
    browser: bool


@dataclass
class _Client:
    served: deque[float] = field(default_factory=deque)  # rate limit: times of answers served
    recent: deque[float] = field(default_factory=deque)  # burst: times of every request
    banned_until: float = 0.0


class PushbackSite:
    """Hosts `ip -> Pushback` on one port, each from this object's event-loop thread."""

    def __init__(self, hosts: dict[str, Pushback], port: int, pages: int = 12) -> None:
        self.hosts, self.port, self.pages = hosts, port, pages
        self.log: dict[str, list[Hit]] = {ip: [] for ip in hosts}
        self._clients: dict[tuple[str, str], _Client] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pushback-site", daemon=True)
        self._servers: list[asyncio.Server] = []

    def seeds(self) -> list[str]:
        return [f"http://{ip}:{self.port}/" for ip in self.hosts]

    def urls(self, ip: str) -> set[str]:
        """Every page of a host (what a crawl from its seed must fetch)."""
        return {f"http://{ip}:{self.port}/"} | {f"http://{ip}:{self.port}/p/{n}" for n in range(1, self.pages + 1)}

    def __enter__(self) -> PushbackSite:
        self._thread.start()
        for ip in self.hosts:
            start = asyncio.start_server(self._serve, ip, self.port)
            self._servers.append(asyncio.run_coroutine_threadsafe(start, self._loop).result(10))
        return self

    def __exit__(self, *_: object) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            ip, client = writer.get_extra_info("sockname")[0], writer.get_extra_info("peername")[0]
            path = head.split(" ", 2)[1].split("?", 1)[0]
            browser = "chrome" in _header(head, "user-agent").lower()
            status, headers, body = self.answer(ip, client, path, browser, time.time())
            lines = [f"HTTP/1.1 {status} Status", "Connection: close", f"Content-Length: {len(body)}", *headers]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError):
            pass
        finally:
            writer.close()

    def answer(self, ip: str, client: str, path: str, browser: bool, now: float) -> tuple[int, list[str], bytes]:
        """(status, header lines, body) of one request, after the host's switches."""
        rules, state = self.hosts[ip], self._clients.setdefault((ip, client), _Client())
        status, headers, body = self._page(ip, path)
        if path != "/robots.txt":
            status, headers, body = self._push_back(rules, state, now, browser) or (status, headers, body)
        self.log[ip].append(Hit(now, path, status, client, browser))
        return status, headers, body

    def _push_back(self, rules: Pushback, state: _Client, now: float,
                   browser: bool) -> tuple[int, list[str], bytes] | None:  # fmt: skip
        if rules.ban_burst:
            _trim(state.recent, now - rules.ban_window)
            state.recent.append(now)
            if now < state.banned_until:
                return 403, ["Content-Type: text/plain"], b"banned"
            if len(state.recent) > rules.ban_burst:
                state.banned_until = now + rules.ban_seconds
                return 403, ["Content-Type: text/plain"], b"banned"
        if rules.rate_limit:
            _trim(state.served, now - rules.rate_window)
            if len(state.served) >= rules.rate_limit:
                return 429, [f"Retry-After: {rules.retry_after}", "Content-Type: text/plain"], b"slow down"
            state.served.append(now)
        if rules.captcha and not browser:
            return 200, ["Content-Type: text/html"], CAPTCHA
        return None

    def _page(self, ip: str, path: str) -> tuple[int, list[str], bytes]:
        if path == "/robots.txt":
            return 404, ["Content-Type: text/plain"], b""
        number = 0 if path == "/" else _page_number(path)
        if number is None or number > self.pages:
            return 404, ["Content-Type: text/plain"], b"not found"
        links = '<a href="/">home</a> ' + "".join(f'<a href="/p/{n}">page {n}</a> ' for n in (number + 1, number + 2)
                                                  if n <= self.pages)  # fmt: skip
        title = f"{ip} page {number}"
        body = f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{FILLER}{links}</body></html>"
        return 200, ["Content-Type: text/html"], body.encode()


def _trim(times: deque[float], before: float) -> None:
    while times and times[0] <= before:
        times.popleft()


def _page_number(path: str) -> int | None:
    head, _, tail = path.rpartition("/")
    return int(tail) if head == "/p" and tail.isdigit() and int(tail) > 0 else None


def _header(head: str, name: str) -> str:
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return ""
