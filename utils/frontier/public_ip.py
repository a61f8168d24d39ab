"""The public IP of this machine, for IP-keyed throttles: looked up off the event loop, with a timeout.

Scrapy Cluster asked a third-party URL on the reactor thread with no timeout and fell back to
127.0.0.1 silently (its issue #169). Here a daemon thread asks PUBLIC_IP_URL every
SCHEDULER_IP_REFRESH seconds with PUBLIC_IP_TIMEOUT, logs when it cannot, and keeps the last IP
it found (the fallback is used only until a first answer).
"""

from __future__ import annotations

import logging
import re
import threading
import urllib.request
from collections.abc import Callable

from utils.config.settings import Settings

log = logging.getLogger(__name__)

FALLBACK_IP = "127.0.0.1"  # Scrapy Cluster's value when the lookup fails


def lookup(url: str, timeout: float, pattern: str) -> str | None:
    """The first IP address in the answer of `url`, or None (no answer in time, or no IP in it)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - an operator's URL
            text = answer.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        log.warning("Could not reach out to get public ip", extra={"url": url, "error": str(exc)})
        return None
    found = re.search(pattern, text)
    if found is None:
        log.warning("Could not find an IP in the public ip answer", extra={"url": url})
        return None
    return found.group(1)


class PublicIpWatcher:
    """Calls `on_change(ip)` with the first IP found (or the fallback) and again on every change."""

    def __init__(
        self, url: str, timeout: float, pattern: str, refresh: float, on_change: Callable[[str], None]
    ) -> None:
        self.url, self.timeout, self.pattern, self.refresh = url, timeout, pattern, refresh
        self.on_change = on_change
        self.ip: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="public-ip", daemon=True)

    @classmethod
    def from_settings(cls, settings: Settings, on_change: Callable[[str], None]) -> PublicIpWatcher:
        return cls(
            settings.get_str("PUBLIC_IP_URL"),
            settings.get_float("PUBLIC_IP_TIMEOUT"),
            settings.get_str("IP_ADDR_REGEX"),
            settings.get_float("SCHEDULER_IP_REFRESH"),
            on_change,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def check(self) -> None:
        """One lookup; the first one settles on the fallback when it fails."""
        found = lookup(self.url, self.timeout, self.pattern) if self.url else None
        ip = found or self.ip or FALLBACK_IP
        if ip != self.ip:
            log.info("Changed Public IP", extra={"old_ip": self.ip, "new_ip": ip})
            self.ip = ip
            self.on_change(ip)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check()
            self._stop.wait(self.refresh)
