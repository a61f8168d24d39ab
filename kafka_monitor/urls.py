"""A seed's queue domain and dupefilter fingerprint, fast for URLs that are already canonical.

w3lib's canonicalize_url (inside utils.fingerprint) costs ~6 µs and urlsplit another ~1.5 µs: a
sixth of the 50 µs a message may take at 20,000 messages/s. Most seeds are plain URLs that
canonicalize_url returns unchanged (lower-case host, a path of unreserved characters, no query,
no fragment, no dot segments); for those the fingerprint is taken over the URL as it is.
Everything else goes through utils.fingerprint and utils.domains. tests/unit check that both paths
give the same bytes and domains, over generated URLs.
"""

from __future__ import annotations

import hashlib
import re

from utils.domains import host_domain, url_domain
from utils.fingerprint import FINGERPRINT_BYTES, fingerprint

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*"  # no empty, '.' or '..' segment: nothing to normalise
PLAIN_URL = re.compile(
    rf"https?://(?P<host>{_LABEL}(?:\.{_LABEL})*)(?::[1-9][0-9]{{0,4}})?/(?:{_SEGMENT}(?:/{_SEGMENT})*/?)?\Z"
)


def domain_and_fingerprint(url: str, method: str, body: str | None, filtered: bool = True) -> tuple[str, bytes | None]:
    """(queue domain, fingerprint or None when not filtered); the domain is '' for a URL without host."""
    plain = PLAIN_URL.match(url)
    if plain is None:
        return url_domain(url), (fingerprint(url, method, body) if filtered else None)
    domain = host_domain(plain.group("host"))
    if not filtered:
        return domain, None
    if body:
        return domain, fingerprint(url, method, body)
    digest = hashlib.sha1(f"{method.upper()}\0{url}\0".encode())  # utils.fingerprint's layout
    return domain, digest.digest()[:FINGERPRINT_BYTES]
