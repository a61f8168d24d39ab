"""A seed's queue domain and dupefilter fingerprint, fast for URLs that are already canonical.

urlsplit costs ~1.5 µs per seed; for plain URLs (utils.fingerprint.PLAIN_URL, which also lets the
fingerprint skip w3lib's canonicalisation) the host is taken from the same regex match.
"""

from __future__ import annotations

from utils.frontier.domains import host_domain, url_domain
from utils.frontier.fingerprint import PLAIN_URL, fingerprint


def domain_and_fingerprint(url: str, method: str, body: str | None, filtered: bool = True) -> tuple[str, bytes | None]:
    """(queue domain, fingerprint or None when not filtered); the domain is '' for a URL without host."""
    plain = PLAIN_URL.match(url)
    domain = host_domain(plain.group("host")) if plain else url_domain(url)
    return domain, (fingerprint(url, method, body) if filtered else None)
