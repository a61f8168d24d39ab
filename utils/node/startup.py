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
from utils.services.process import Probe

log = logging.getLogger(__name__)


def service_addresses(settings: Settings) -> dict[str, tuple[str, int]]:
    """Where each service of the settings listens (the node manager's view, one source of truth)."""
    return configured_addresses(settings)


PROBES = {"redis": redis_ready, "kafka": broker_ready, "zookeeper": zookeeper_ready}


def _probe(settings: Settings, name: str) -> Probe:
    """A secured Redis (TLS, ACL user or password) answers a plain PING with nothing or -NOAUTH, so
    it is asked through the client factory instead; wrong credentials end the wait at once."""
    secured = settings.get_bool("REDIS_SSL") or settings.get_str("REDIS_USERNAME") or (
        settings.get_str("REDIS_PASSWORD") or settings.get_str("REDIS_PASSWORD_FILE"))  # fmt: skip
    if name != "redis" or not secured:
        return PROBES[name]

    def redis_answers(_host: str, _port: int) -> bool:
        import redis  # noqa: PLC0415 - only a secured start-up needs the client here

        from utils.config.clients import redis_client  # noqa: PLC0415 - it loads kafka-python too

        try:
            redis_client(settings, ping=True).close()
        except (redis.AuthenticationError, redis.exceptions.NoPermissionError) as exc:
            raise SystemExit(f"Redis refused Shoal's credentials: {exc}") from None
        except (redis.RedisError, redis.exceptions.RedisClusterException, OSError):
            return False
        return True

    return redis_answers


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
        probe = _probe(settings, name) if name == "redis" else probes[name]
        while not probe(host, port) and not stop.is_set():
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} at {host}:{port} did not answer within {timeout:.0f} s")
            log.warning("Waiting for service", extra={"service": name, "address": f"{host}:{port}"})
            stop.wait(delay)
            delay = min(delay * 2, 5.0)
