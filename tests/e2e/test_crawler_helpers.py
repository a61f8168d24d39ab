"""Helpers of the crawler's e2e tests (no tests here): seeds straight into the frontier, an echo
server that shows what a spider sent, and progress reads.

Seeds are written as the kafka monitor writes them (schema defaults filled, the stored record, the
seed flag), so these tests exercise the crawler alone and do not depend on the monitor's timing.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.cluster import TestCluster
from utils import schemas
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.frontier.domains import url_domain
from utils.frontier.fingerprint import fingerprint


def seed(cluster: TestCluster, url: str, **fields: Any) -> None:
    """Queue one crawl request as the kafka monitor would."""
    message = schemas.validate("crawl", {"url": url, "appid": "testapp", "crawlid": "c1", **fields})
    record = crawl_request.to_record(message)
    entry = NewRequest(
        spiderid=record["spiderid"], domain=url_domain(url), priority=record["priority"],
        appid=record["appid"], crawlid=record["crawlid"], **crawl_request.encode(record)._asdict(),
        fingerprint=fingerprint(url, record.get("method", "GET"), record.get("body")),
        max_pages=record.get("domain_max_pages") or 0, seed=True,
    )  # fmt: skip
    frontier = Frontier.from_settings(cluster.settings, redis_client(cluster.settings))
    assert frontier.enqueue([entry]) == ["queued"]


def progress(cluster: TestCluster, crawlid: str = "c1", spiderid: str = "link", appid: str = "testapp") -> dict:
    raw = redis_client(cluster.settings, decode=True).hgetall(keys.crawl_progress(spiderid, appid, crawlid))
    return {k: int(float(v)) for k, v in raw.items() if k not in {"spiderid", "appid", "crawlid"}}


def settled(counts: dict) -> bool:
    """Nothing of the crawl is queued, in flight or waiting to retry."""
    return counts.get("enqueued", 0) > 0 and not any(counts.get(k, 0) for k in ("queued", "inflight", "retrying"))


def crawler_started(cluster: TestCluster, count: int = 1, spiderid: str = "link") -> bool:
    """`count` crawler processes of a spider beat their heartbeat (the scheduler is open)."""
    beats = redis_client(cluster.settings, decode=True).zrange("stats:heartbeats", 0, -1)
    return sum(1 for b in beats if b.startswith("crawler|") and b.split("|")[2].startswith(f"{spiderid}:")) >= count


class EchoServer:
    """Answers every request with an HTML page holding the request as JSON (and a link onwards).

    `/ip` answers a public-IP lookup; `/busy` answers 429 with `Retry-After` the first `busy` times.
    Every request is kept in `requests` with its arrival time.
    """

    def __init__(self, host: str, port: int, retry_after: int = 2, busy: int = 1) -> None:
        self.requests: list[dict[str, Any]] = []
        self.busy = busy
        self.retry_after = retry_after
        self._lock = threading.Lock()
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                echo.answer(self)

            do_POST = do_GET  # noqa: N815

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.base = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        seen = {
            "method": handler.command,
            "target": handler.path,
            "headers": {k: v for k, v in handler.headers.items()},
            "body": handler.rfile.read(length).decode("utf-8", "replace"),
            "at": time.monotonic(),
        }
        path = handler.path.split("://", 1)[-1].partition("/")[2] if "://" in handler.path else handler.path[1:]
        with self._lock:
            self.requests.append(seen)
            busy = path == "busy" and self.busy > 0
            self.busy -= 1 if busy else 0
        if path == "robots.txt":
            return self._send(handler, 404, "text/plain", b"")
        if path == "ip":
            return self._send(handler, 200, "text/plain", b"Your IP is 10.9.8.7\n")
        if busy:
            return self._send(handler, 429, "text/plain", b"slow down", {"Retry-After": str(self.retry_after)})
        body = f'<html><body><pre>{json.dumps(seen)}</pre><a href="/second">next</a></body></html>'
        self._send(handler, 200, "text/html; charset=utf-8", body.encode(), {"Set-Cookie": "leak=1; Path=/"})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, ctype: str, body: bytes, extra: dict | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def of(self, suffix: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["target"].endswith(suffix)]


def echoed(page: dict) -> dict:
    """The request an EchoServer page shows."""
    body = page["body"]
    return json.loads(body[body.index("<pre>") + 5 : body.index("</pre>")])
