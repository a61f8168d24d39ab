"""The near-duplicate index in a real Redis (and a Redis Cluster): the first page of a text is indexed,
a later one within the distance names it, one further away does not; per app, across crawls; with a TTL."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from utils.frontier import keys
from utils.frontier.near_duplicates import NearDuplicateIndex

pytestmark = pytest.mark.integration


def flipped(fingerprint: int, bits: list[int]) -> str:
    for bit in bits:
        fingerprint ^= 1 << bit
    return f"{fingerprint:016x}"


def test_within_three_bits_is_a_near_duplicate_of_the_first_url(redis_db: Any) -> None:
    index = NearDuplicateIndex(redis_db, ttl=600, distance=4)
    app = f"app{uuid.uuid4().hex[:6]}"
    base = random.getrandbits(64)
    first = index.check(app, "c1", f"{base:016x}", "http://127.0.0.1/a", "127.0.0.1")
    assert not first.near_duplicate
    assert first.cluster_id == f"{base:016x}"
    # 4 bits spread over 4 bands, and 4 bits all in one band: both found (5 bands: one is always clean)
    for bits in ([1, 20, 40, 60], [52, 55, 60, 63]):
        verdict = index.check(app, "c1", flipped(base, bits), f"http://127.0.0.1/{bits}", "127.0.0.1")
        assert verdict.near_duplicate
        assert verdict.duplicate_of == "http://127.0.0.1/a"
        assert verdict.cluster_id == f"{base:016x}"
    assert verdict.host_near_duplicates == 2
    far = index.check(app, "c1", flipped(base, [0, 17, 33, 49, 61]), "http://127.0.0.1/far", "127.0.0.1")
    assert not far.near_duplicate
    # a later crawl of the same app sees the first; another app does not
    assert index.check(app, "c2", f"{base:016x}", "http://127.0.0.1/b", "127.0.0.1").duplicate_of == "http://127.0.0.1/a"
    assert not index.check(app + "x", "c1", f"{base:016x}", "http://127.0.0.1/b", "127.0.0.1").near_duplicate
    for band in range(5):
        assert 0 < redis_db.ttl(keys.near_duplicate_band(app, band)) <= 600
    assert 0 < redis_db.ttl(keys.near_duplicate_first(app)) <= 600
    assert 0 < redis_db.ttl(keys.near_duplicate_hosts(app, "c1")) <= 600
