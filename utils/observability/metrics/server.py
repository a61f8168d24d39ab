"""The /metrics endpoint of a process: prometheus-client's HTTP server on a daemon thread.

One per process, started once by the component's entry point; a second call returns the same URL.
Port 0 takes a free port (several processes of a node share a host), and the URL is published for
`shoal status --json` (utils/observability/metrics/publish.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.observability.metrics import publish
from utils.observability.metrics.record import set_dependency_up
from utils.observability.metrics.registry import DEPENDENCY_UP, HEALTHY, LABELS, PROCESS_INFO, REGISTRY, STATE

log = logging.getLogger(__name__)

_WILDCARDS = {"", "0.0.0.0", "::"}


@dataclass
class _Served:
    server: WSGIServer
    thread: threading.Thread
    url: str
    published: Path | None


_served: _Served | None = None
_lock = threading.Lock()


def _version() -> str:
    try:
        return metadata.version("shoal")
    except metadata.PackageNotFoundError:
        return "unknown"


def configure_process(settings: Settings, component: str) -> None:
    """Name the component every metric of this process is labelled with, even with metrics off."""
    previous, STATE.component = STATE.component, component
    if previous != component:
        _forget_component(previous)
    LABELS.limit = settings.get_int("METRICS_LABEL_VALUES")
    PROCESS_INFO.labels(component).info({"version": _version(), "host": socket.gethostname()})
    HEALTHY.labels(component).set(1)
    with STATE.lock:
        known = dict(STATE.dependencies)
    for dependency, up in known.items():  # reported before the component was named
        set_dependency_up(dependency, up)


def _forget_component(component: str) -> None:
    """Drop the identity and health series of the name this process had before (e.g. "unknown")."""
    for metric, labels in ((PROCESS_INFO, (component,)), (HEALTHY, (component,))):
        with contextlib.suppress(KeyError):
            metric.remove(*labels)
    with STATE.lock:
        known = list(STATE.dependencies)
    for dependency in known:
        with contextlib.suppress(KeyError):
            DEPENDENCY_UP.remove(component, dependency)


def url_for(host: str, port: int) -> str:
    """The URL a local client uses: a wildcard bind is reached on loopback."""
    if host in _WILDCARDS:
        host = "127.0.0.1"
    with_brackets = host
    try:
        if ipaddress.ip_address(host).version == 6:
            with_brackets = f"[{host}]"
    except ValueError:
        pass  # a host name
    return f"http://{with_brackets}:{port}/metrics"


def start_metrics_server(settings: Settings, component: str) -> str | None:
    """Serve /metrics on METRICS_HOST:METRICS_PORT; its URL, or None with METRICS_ENABLED off.

    ConfigError when the address cannot be bound (a fixed port already taken).
    """
    global _served
    configure_process(settings, component)
    if not settings.get_bool("METRICS_ENABLED"):
        return None
    with _lock:
        if _served is not None:
            return _served.url
        host, port = settings.get_str("METRICS_HOST"), settings.get_int("METRICS_PORT")
        try:
            server, thread = start_http_server(port, host, registry=REGISTRY)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc}; set METRICS_PORT") from exc
        url = url_for(host, server.server_port)
        _served = _Served(server, thread, url, publish.publish(url, component))
    log.info("Serving metrics", extra={"metrics_url": url, "metrics_component": component})
    return url


def metrics_url() -> str | None:
    """This process's metrics URL, None when no server runs."""
    with _lock:
        return None if _served is None else _served.url


def stop_metrics_server() -> None:
    """Stop serving and remove the published URL (graceful shutdown, tests)."""
    global _served
    with _lock:
        served, _served = _served, None
    if served is None:
        return
    served.server.shutdown()
    served.server.server_close()
    served.thread.join(timeout=5)
    if served.published is not None:
        publish.unpublish(served.published)
