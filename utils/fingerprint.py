"""Request fingerprints for the dupefilter: 8 binary bytes of SHA-1 over method, canonical URL, body.

Eight bytes keep the exact dupefilter under 70 bytes per URL in Redis; the chance that two of
a million URLs collide is about 3e-8 (birthday bound, 64 bits).
"""

from __future__ import annotations

import hashlib

from w3lib.url import canonicalize_url

FINGERPRINT_BYTES = 8


def fingerprint(url: str, method: str = "GET", body: bytes | str | None = None) -> bytes:
    """The dupefilter key of a request; fragments are ignored, query order is normalised."""
    digest = hashlib.sha1(method.upper().encode())
    digest.update(b"\0")
    digest.update(canonicalize_url(url).encode())
    digest.update(b"\0")
    if body:
        digest.update(body.encode() if isinstance(body, str) else body)
    return digest.digest()[:FINGERPRINT_BYTES]
