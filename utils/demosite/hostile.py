"""A hostile web site on loopback: what a crawler meets from servers that are broken or malicious.

Paths (every one answers with `Connection: close`):
  /big            a 200 MB body, streamed, with its Content-Length
  /big-chunked    the same without Content-Length (chunked: the size is only known by counting)
  /gzip-bomb      ~200 KB of gzip that decompresses to 200 MB (also /br-bomb, /zstd-bomb)
  /links          an HTML page of 1,000,000 links
  /loop           a redirect to itself, forever
  /redirect?to=U  a redirect to U (an internal address, say)
  /trickle        a 1,000-byte body sent one byte a second
  /               a small page linking to every path above
Used by the crawler's e2e tests and bench/hostile_memory.py; stdlib asyncio plus brotli and
zstandard (declared: Scrapy needs them to decode those codecs).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Coroutine
from functools import cache
from typing import Any
from urllib.parse import parse_qs, urlsplit

import brotli
import zstandard

BIG = 200 * 1024 * 1024  # bytes of /big and of every bomb's decompressed body
LINKS = 1_000_000  # links on /links
TRICKLE = 1000  # bytes of /trickle, one a second
CHUNK = 1024 * 1024
PATHS = ("/big", "/big-chunked", "/gzip-bomb", "/br-bomb", "/zstd-bomb", "/links", "/loop", "/trickle")

Writer = asyncio.StreamWriter


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Status'}", "Server: shoal-hostile", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@cache
def bomb(codec: str) -> bytes:
    """BIG zero bytes compressed with `codec` (gzip, br or zstd); built once, a few hundred KB."""
    zeros = bytes(CHUNK)
    if codec == "gzip":
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
        return b"".join(packer.compress(zeros) for _ in range(BIG // CHUNK)) + packer.flush()
    if codec == "br":
        compressor = brotli.Compressor(quality=5)
        parts = [compressor.process(zeros) for _ in range(BIG // CHUNK)]
        return b"".join(parts) + compressor.finish()
    writer = zstandard.ZstdCompressor(level=3).compressobj(size=BIG)
    return b"".join(writer.compress(zeros) for _ in range(BIG // CHUNK)) + writer.flush()


@cache
def links_page() -> bytes:
    """LINKS relative links, gzip-compressed on the wire (~27 MB of HTML, ~5 MB on the wire)."""
    body = b"<html><body>" + b"".join(b"<a href=/l%d>%d</a>" % (i, i) for i in range(LINKS)) + b"</body></html>"
    return gzip.compress(body, 6)


class HostileSite:
    """Serves the paths above on `host:port` from its own event-loop thread; `hits` counts paths."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.base = f"http://{host}:{port}"
        self.hits: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile-site", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[Writer] = set()
        self._routes: dict[str, Callable[[Writer, str], Coroutine[Any, Any, None]]] = {
            "/": self._index, "/big": self._big, "/big-chunked": self._big_chunked, "/links": self._links,
            "/loop": self._loop_redirect, "/trickle": self._trickle, "/gzip-bomb": self._bomb("gzip"),
            "/br-bomb": self._bomb("br"), "/zstd-bomb": self._bomb("zstd"), "/robots.txt": self._robots,
            "/redirect": self._redirect,
        }  # fmt: skip

    def url(self, path: str) -> str:
        return self.base + path

    def __enter__(self) -> HostileSite:
        # Bodies are built before the first request: building them on demand takes seconds on a busy
        # machine, and a crawler's download timeout would then report the build, not the bomb.
        for codec in ("gzip", "br", "zstd"):
            bomb(codec)
        links_page()
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, self.host, self.port), self._loop)
        self._server = future.result(10)
        return self

    def __exit__(self, *_: object) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()  # a trickle sleeping between two bytes
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self._writers.add(writer)
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            target = request.split(b" ", 2)[1].decode("latin-1")
            path = target.split("?", 1)[0]
            self.hits[path] += 1
            route = self._routes.get(path, self._not_found)
            await route(writer, target)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError):
            pass  # the crawler gave up on us: that is the point
        except asyncio.CancelledError:
            pass  # the site is closing (ending quietly: asyncio's stream callback chokes on a cancelled task)
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _index(self, writer: Writer, _target: str) -> None:
        body = "".join(f'<a href="{p}">{p}</a>\n' for p in PATHS).encode()
        writer.write(_head(200, {"Content-Type": "text/html", "Content-Length": str(len(body))}) + body)
        await writer.drain()

    async def _robots(self, writer: Writer, _target: str) -> None:
        writer.write(_head(404, {"Content-Length": "0"}))
        await writer.drain()

    async def _not_found(self, writer: Writer, _target: str) -> None:
        writer.write(_head(404, {"Content-Type": "text/plain", "Content-Length": "9"}) + b"not found")
        await writer.drain()

    async def _big(self, writer: Writer, _target: str) -> None:
        writer.write(_head(200, {"Content-Type": "text/html", "Content-Length": str(BIG)}))
        await _stream(writer, BIG, chunked=False)

    async def _big_chunked(self, writer: Writer, _target: str) -> None:
        writer.write(_head(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"}))
        await _stream(writer, BIG, chunked=True)

    def _bomb(self, codec: str) -> Callable[[Writer, str], Coroutine[Any, Any, None]]:
        async def send(writer: Writer, _target: str) -> None:
            body = await asyncio.to_thread(bomb, codec)
            headers = {"Content-Type": "text/html", "Content-Encoding": codec, "Content-Length": str(len(body))}
            writer.write(_head(200, headers) + body)
            await writer.drain()

        return send

    async def _links(self, writer: Writer, _target: str) -> None:
        body = await asyncio.to_thread(links_page)
        headers = {"Content-Type": "text/html", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
        writer.write(_head(200, headers) + body)
        await writer.drain()

    async def _loop_redirect(self, writer: Writer, _target: str) -> None:
        writer.write(_head(302, {"Location": f"{self.base}/loop", "Content-Length": "0"}))
        await writer.drain()

    async def _redirect(self, writer: Writer, target: str) -> None:
        location = parse_qs(urlsplit(target).query).get("to", ["/"])[0]
        writer.write(_head(302, {"Location": location, "Content-Length": "0"}))
        await writer.drain()

    async def _trickle(self, writer: Writer, _target: str) -> None:
        writer.write(_head(200, {"Content-Type": "text/plain", "Content-Length": str(TRICKLE)}))
        for _ in range(TRICKLE):
            await writer.drain()
            writer.write(b"x")
            await asyncio.sleep(1.0)
            if writer.is_closing():
                return


async def _stream(writer: Writer, size: int, chunked: bool) -> None:
    """`size` bytes of filler in 1 MiB writes, waiting for the reader (never all in memory)."""
    block = b"<p>" + b"a" * (CHUNK - 7) + b"</p>"
    for _ in range(size // CHUNK):
        writer.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
        await writer.drain()
    if chunked:
        writer.write(b"0\r\n\r\n")
        await writer.drain()
