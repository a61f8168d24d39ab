"""The throttle and queue domain of a URL: its registered domain, or the host itself for an IP.

tldextract runs on its bundled public-suffix snapshot only: Shoal never fetches the suffix list
from the network (suffix_list_urls=()), so a crawler starts the same way offline.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

import tldextract

_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def host_domain(host: str) -> str:
    """`www.cnn.com` -> `cnn.com`; `127.0.0.10` -> `127.0.0.10`; `localhost` -> `localhost`."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    parts = _extract(host)
    if parts.domain and parts.suffix:
        return f"{parts.domain}.{parts.suffix}"
    return parts.domain or host


def url_domain(url: str) -> str:
    """The domain of a URL's host; a URL without a host gives the empty string."""
    return host_domain(urlsplit(url).hostname or "")
