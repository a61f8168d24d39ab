"""The throttle and queue domain of a URL: its registered domain, or the host itself for an IP.

tldextract runs on its bundled public-suffix snapshot only: Shoal never fetches the suffix list
from the network (suffix_list_urls=()), so a crawler starts the same way offline.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

import tldextract

from utils.config.address_policy import literal_address

_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def host_domain(host: str) -> str:
    """`www.cnn.com` -> `cnn.com`; `127.0.0.10` -> `127.0.0.10`; `localhost` -> `localhost`.

    Every spelling of an address is reduced to its one canonical form, so a ZooKeeper blacklist
    entry `127.0.0.1` also stops `2130706433`, `0x7f.1`, `0177.0.0.1` and `[::ffff:127.0.0.1]`
    (the resolver of the crawler would connect to the same address).
    """
    host = host.strip("[]").lower().rstrip(".")
    address = numeric_address(host)
    return address if address is not None else _registered_domain(host)


def numeric_address(host: str) -> str | None:
    """The canonical text of an IP address host, however spelt (decimal, hex, octal, IPv4-mapped)."""
    ip = literal_address(host)  # the address policy's reading: both must agree on what is an address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return None if ip is None else str(ip)


def _registered_domain(host: str) -> str:
    parts = _extract(host)
    if parts.domain and parts.suffix:
        return f"{parts.domain}.{parts.suffix}"
    return parts.domain or host


def url_domain(url: str) -> str:
    """The domain of a URL's host; a URL without a host gives the empty string."""
    return host_domain(urlsplit(url).hostname or "")
