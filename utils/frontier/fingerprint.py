"""Request fingerprints for the dupefilter, and the size of a Bloom-filter dupefilter.

Eight bytes of SHA-1 over method, canonical URL and body keep the exact dupefilter under 70 bytes
per URL in Redis; the chance that two of a million URLs collide is about 3e-8 (birthday bound,
64 bits). The Bloom mode (enqueue.lua) probes bits derived from the same eight bytes.
"""

from __future__ import annotations

import hashlib
import math

from w3lib.url import canonicalize_url

from utils.config.address_policy import PLAIN_URL  # URLs canonicalize_url gives back unchanged

FINGERPRINT_BYTES = 8


def canonical_url(url: str) -> str:
    """w3lib's canonicalize_url, which a plain URL skips: it would give the URL back (~6 us per link)."""
    return url if PLAIN_URL.match(url) else canonicalize_url(url)


# Fingerprints of recent GET URLs: ~85 % of the links a crawler finds were found before (bench site:
# 42,414 links, 5,110 pages), and a dict hit costs a tenth of a fingerprint. Emptied when full.
_RECENT_GETS: dict[str, bytes] = {}
RECENT_GETS_MAX = 100_000  # URLs (~20 MB at most)


def fingerprint(url: str, method: str = "GET", body: bytes | str | None = None) -> bytes:
    """The dupefilter key of a request; fragments are ignored, query order is normalised."""
    if body or method != "GET":
        return _fingerprint(url, method, body)
    fp = _RECENT_GETS.get(url)
    if fp is None:
        if len(_RECENT_GETS) >= RECENT_GETS_MAX:
            _RECENT_GETS.clear()
        fp = _RECENT_GETS[url] = _fingerprint(url, method, body)
    return fp


def _fingerprint(url: str, method: str, body: bytes | str | None) -> bytes:
    if not body and PLAIN_URL.match(url):
        return hashlib.sha1(f"{method.upper()}\0{url}\0".encode()).digest()[:FINGERPRINT_BYTES]
    return canonical_fingerprint(url, method, body)


def canonical_fingerprint(url: str, method: str = "GET", body: bytes | str | None = None) -> bytes:
    """`fingerprint` without the fast path: always through w3lib's canonicalize_url."""
    digest = hashlib.sha1(method.upper().encode())
    digest.update(b"\0")
    digest.update(canonicalize_url(url).encode())
    digest.update(b"\0")
    if body:
        digest.update(body.encode() if isinstance(body, str) else body)
    return digest.digest()[:FINGERPRINT_BYTES]


def bloom_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """(bits, hash functions) of a Bloom filter holding `capacity` URLs at `error_rate` false positives.

    The textbook optimum m = -n ln p / (ln 2)^2, k = m/n ln 2: 14.4 bits (1.8 bytes) per URL at
    0.1 %. The bit count is rounded up to a prime so double hashing never cycles early.
    """
    if capacity < 1 or not 0 < error_rate < 1:
        raise ValueError(f"bad Bloom filter shape: capacity={capacity} error_rate={error_rate}")
    bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
    hashes = max(1, round(bits / capacity * math.log(2)))
    return _next_prime(max(bits, 3)), hashes


def _next_prime(n: int) -> int:
    candidate = n | 1
    while any(candidate % d == 0 for d in range(3, math.isqrt(candidate) + 1, 2)):
        candidate += 2
    return candidate


# --- The self-sizing dupefilter (DUPEFILTER_MODE auto; lua/lib/seen.lua) ---------------------------
STAGE_MAX = 64_000_000  # URLs per Bloom stage at most: a stage stays well under Redis's 512 MB string limit


def stage_shape(exact_max: int, false_drop: float, stage: int) -> tuple[int, int, int]:
    """(bits, hash functions, capacity) of Bloom stage `stage` of a crawl that went past `exact_max`
    exact fingerprints: stage i holds exact_max * 2^i URLs (at most STAGE_MAX) at a false-positive
    rate of false_drop / 2^(i+2), so a new URL checked against every stage is dropped with a
    probability below false_drop / 2 whatever the number of stages (half the bound: double hashing and
    rounded hash counts put a filter ~8 % above its textbook rate, measured) (a scalable Bloom filter, Almeida et
    al. 2007). lua/lib/seen.lua computes the same shapes."""
    capacity = min(exact_max * 2**stage, STAGE_MAX)
    bits, hashes = bloom_size(capacity, false_drop / 2 ** (stage + 2))
    return bits, hashes, capacity


def stages_for(exact_max: int, false_drop: float, urls: int) -> list[tuple[int, int, int]]:
    """The stages a crawl of `urls` URLs ends with (none while it stays under `exact_max`)."""
    shapes: list[tuple[int, int, int]] = []
    left = urls - exact_max
    while left > 0:
        shapes.append(stage_shape(exact_max, false_drop, len(shapes)))
        left -= shapes[-1][2]
    return shapes


def false_drop_now(stages: list[tuple[int, int, int]]) -> float:
    """Chance that a new URL is taken for a seen one, given each stage's (bits, hashes, URLs held):
    1 - prod(1 - (1 - e^(-k n / m))^k), the standard Bloom estimate per stage."""
    new = 1.0
    for bits, hashes, held in stages:
        new *= 1 - (1 - math.exp(-hashes * held / bits)) ** hashes
    return 1 - new
