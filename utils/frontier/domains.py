"""The throttle and queue domain of a URL: its registered domain, or the host itself for an IP.

The host is the address policy's `canonical_host` of the URL Scrapy fetches (`fetched_url`), so the
queue, the blacklist, the throttle and the policy all judge the same host (issue 30).

tldextract runs on its bundled public-suffix snapshot only: Shoal never fetches the suffix list
from the network (suffix_list_urls=()), so a crawler starts the same way offline.
"""

from __future__ import annotations

from functools import lru_cache

import tldextract

from utils.config.address_policy import canonical_host, literal_address, url_host
from utils.frontier.fingerprint import PLAIN_URL

_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def host_domain(host: str) -> str:
    """`www.cnn.com` -> `cnn.com`; `127.0.0.10` -> `127.0.0.10`; `localhost` -> `localhost`.

    Every spelling of an address is reduced to its one canonical form, so a ZooKeeper blacklist
    entry `127.0.0.1` also stops `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.0.0.1.` and
    `[::ffff:127.0.0.1]` (the resolver of the crawler would connect to the same address).
    """
    host = canonical_host(host)
    return host if literal_address(host) is not None else _registered_domain(host)


def numeric_address(host: str) -> str | None:
    """The canonical text of an IP address host, however spelt (decimal, hex, octal, IPv4-mapped)."""
    host = canonical_host(host)
    return host if literal_address(host) is not None else None


def _registered_domain(host: str) -> str:
    parts = _extract(host)
    if parts.domain and parts.suffix:
        return f"{parts.domain}.{parts.suffix}"
    return parts.domain or host


def url_domain(url: str) -> str:
    """The domain of the host Scrapy fetches for `url`; '' without a host, ValueError for a URL it cannot fetch."""
    plain = PLAIN_URL.match(url)  # already what Scrapy fetches (tests/unit/test_kafka_monitor_urls.py)
    return host_domain(plain.group("host") if plain else url_host(url))
