"""Toxiproxy on loopback: its launcher (free port, stopped by pid, log printed on failure) and a
small client of its HTTP API (https://github.com/Shopify/toxiproxy#http-api).

`make toxiproxy` builds the server into the user's cache (SHOAL_TOXIPROXY names another binary).
The client speaks plain urllib: the tests use five calls of the API, not worth a dependency.
Faults are toxics on a proxy; every one added by `fault()` is removed when its block ends, so a
test heals what it broke even when it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from utils.services import LocalService, free_port
from utils.services.probes import port_open

VERSION = "2.5.0"
HOST = "127.0.0.1"
API_TIMEOUT = 10.0  # seconds for one API call (the server answers in microseconds; the machine may be loaded)


def server_binary() -> Path:
    """SHOAL_TOXIPROXY, else where `make toxiproxy` builds it."""
    named = os.environ.get("SHOAL_TOXIPROXY")
    if named:
        return Path(named)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "shoal" / f"toxiproxy-{VERSION}" / "toxiproxy-server"


def toxiproxy_service(run_dir: Path, port: int | None = None) -> LocalService:
    """A not yet started toxiproxy-server on `port` (a free one by default), its log in `run_dir`."""
    binary = server_binary()
    if not binary.is_file():
        raise FileNotFoundError(f"{binary} is missing: run `make toxiproxy` (it builds Toxiproxy {VERSION})")
    port = port or free_port()
    return LocalService(
        name="toxiproxy", argv=[str(binary), "-host", HOST, "-port", str(port)], port=port,
        log_path=run_dir / "toxiproxy.log", data_dir=run_dir / "toxiproxy", probe=port_open, host=HOST,
        pid_path=run_dir / "toxiproxy.pid",
    )  # fmt: skip


class Toxiproxy:
    """The API of one running server: proxies (links) and the toxics (faults) on them."""

    def __init__(self, address: str) -> None:
        self.base = f"http://{address}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,  # noqa: S310 - loopback
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT) as answer:  # noqa: S310 - loopback
                text = answer.read().decode()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"toxiproxy {method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream: str, listen_port: int | None = None) -> str:
        """Create proxy `name` to `upstream`; returns the address it listens on (loopback)."""
        listen = f"{HOST}:{listen_port or free_port()}"
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return listen

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Disabled: every connection through `name` is closed and new ones are refused."""
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, kind: str, stream: str = "downstream", **attributes: Any) -> str:
        """Add a toxic (latency, bandwidth, timeout, reset_peer, limit_data...); returns its name."""
        name = f"{kind}_{stream}"
        body = {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)
        return name

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/proxies/{proxy}/toxics") or [])

    @contextlib.contextmanager
    def fault(self, proxy: str, kind: str, both_ways: bool = True, **attributes: Any) -> Iterator[None]:
        """A toxic on `proxy` (both directions by default) for the duration of the block."""
        streams = ("downstream", "upstream") if both_ways else ("downstream",)
        added = [(proxy, self.add_toxic(proxy, kind, stream, **attributes)) for stream in streams]
        try:
            yield
        finally:
            for name, toxic in added:
                self.remove_toxic(name, toxic)

    def partition(self, proxy: str) -> contextlib.AbstractContextManager[None]:
        """A black hole: bytes stop both ways and nothing is closed (no FIN, no RST), the way a cut
        link or a dead host looks to the client; new connections are accepted and hang the same way."""
        return self.fault(proxy, "timeout", timeout=0)

    def latency(self, proxy: str, ms: int, jitter_ms: int = 0) -> contextlib.AbstractContextManager[None]:
        return self.fault(proxy, "latency", latency=ms, jitter=jitter_ms)

    def bandwidth(self, proxy: str, kib_per_s: int) -> contextlib.AbstractContextManager[None]:
        return self.fault(proxy, "bandwidth", rate=kib_per_s)

    def reset(self) -> None:
        """Every proxy enabled again and every toxic removed."""
        self._call("POST", "/reset")

    def half_open(self, proxy: str) -> contextlib.AbstractContextManager[None]:
        """The far side stops answering without a FIN: the client's requests still go out, no reply
        (nor close) comes back."""
        return self.fault(proxy, "timeout", both_ways=False, timeout=0)

    def reset_peer(self, proxy: str, after_ms: int = 0) -> contextlib.AbstractContextManager[None]:
        """Every connection through `proxy` is reset (RST) `after_ms` after its data starts, for the block."""
        return self.fault(proxy, "reset_peer", both_ways=False, timeout=after_ms)
