"""Start-up waits: a component started before its services waits for them instead of crashing.

Under supervisord every process of a node starts at once; a monitor that exited because the
broker was still starting would only be restarted with back-off, so each waits here first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from utils.config.settings import Settings
from utils.node.layout import configured_addresses
from utils.services import broker_ready, redis_ready, zookeeper_ready
from utils.services.probes import port_open

log = logging.getLogger(__name__)


def service_addresses(settings: Settings) -> dict[str, tuple[str, int]]:
    """Where each service of the settings listens (the node manager's view, one source of truth)."""
    return configured_addresses(settings)


PROBES = {"redis": redis_ready, "kafka": broker_ready, "zookeeper": zookeeper_ready}


def wait_for_services(
    settings: Settings, names: Iterable[str], stop: threading.Event, timeout: float = 120
) -> None:
    """Block until each named service answers; log while waiting; give up after `timeout` s."""
    addresses = service_addresses(settings)
    probes = dict(PROBES)
    if settings.get_str("KAFKA_SECURITY_PROTOCOL").upper() != "PLAINTEXT":
        probes["kafka"] = port_open  # a secured listener does not answer the plain Metadata probe
    deadline = time.monotonic() + timeout
    for name in names:
        host, port = addresses[name]
        delay = 0.1
        while not probes[name](host, port) and not stop.is_set():
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} at {host}:{port} did not answer within {timeout:.0f} s")
            log.warning("Waiting for service", extra={"service": name, "address": f"{host}:{port}"})
            stop.wait(delay)
            delay = min(delay * 2, 5.0)
