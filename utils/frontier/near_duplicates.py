"""An app's near-duplicate index in Redis: 64-bit SimHashes under 5 band hashes, with an idle TTL.

A lookup reads the page's 5 buckets (one pipelined round trip) and compares their SimHashes in the
crawler (`int.bit_count`: ~0.1 ms for the ~600 candidates of a 1,000,000-page index, where the same
loop in Lua took 1.5 ms of Redis time per call); a page near none is then added (`near_duplicates.lua`),
a near-duplicate counted against its host. Two crawlers adding two copies at the same moment may
both index theirs: the later pages of the text find either. The index is per appid, so a later
crawl of the same app finds the pages of the earlier ones while it lives (NEAR_DUPLICATE_TTL after
its last write). Each page costs 5 x 8 bytes of band entries plus, with NEAR_DUPLICATE_FIRST_URLS,
its URL; docs/decisions/near-duplicates-in-redis-bands.md has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from utils.config.settings import Settings
from utils.frontier import keys

_SCRIPT = resources.files("utils.frontier").joinpath("near_duplicates.lua").read_text()
BAND_WIDTHS = (13, 13, 13, 13, 12)  # bits of each band of a 64-bit SimHash, lowest first (utils/extract/simhash.py)


def band_values(fingerprint: int) -> list[bytes]:
    """The fingerprint's bands as the index's hash fields: 2 bytes each, lowest band first."""
    found, shift = [], 0
    for width in BAND_WIDTHS:
        found.append((fingerprint >> shift & ((1 << width) - 1)).to_bytes(2, "big"))
        shift += width
    return found


def nearest(fingerprint: int, buckets: list[bytes | None], distance: int) -> int | None:
    """The first SimHash of the buckets within `distance` bits of `fingerprint`, if any."""
    for bucket in buckets:
        if not bucket:
            continue
        for pos in range(0, len(bucket) - 7, 8):
            other = int.from_bytes(bucket[pos : pos + 8], "big")
            if (other ^ fingerprint).bit_count() <= distance:
                return other
    return None


@dataclass(frozen=True)
class Verdict:
    """A page's place in the index: `cluster_id` (16 hex digits) and `duplicate_of` when near another."""

    near_duplicate: bool
    cluster_id: str
    duplicate_of: str | None
    host_near_duplicates: int  # near-duplicates the crawl has had from the page's host, this one included


class NearDuplicateIndex:
    def __init__(self, client: Any, ttl: int, distance: int, first_urls: bool = True) -> None:
        self.client, self.ttl, self.distance, self.first_urls = client, ttl, distance, first_urls
        self._add = client.register_script(_SCRIPT)

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> NearDuplicateIndex:
        return cls(client, settings.get_int("NEAR_DUPLICATE_TTL"), settings.get_int("NEAR_DUPLICATE_DISTANCE"),
                   settings.get_bool("NEAR_DUPLICATE_FIRST_URLS"))  # fmt: skip

    def check(self, appid: str, crawlid: str, fingerprint: str, url: str, host: str) -> Verdict:
        """Look `fingerprint` (16 hex digits) up; index it (with `url`) when it is near none."""
        value = int(fingerprint, 16)
        bands = band_values(value)
        names = [keys.near_duplicate_band(appid, i) for i in range(len(BAND_WIDTHS))]
        read = self.client.pipeline(transaction=False)
        for name, band in zip(names, bands, strict=True):
            read.hget(name, band)
        found = nearest(value, read.execute(), self.distance)
        if found is None:
            self.add(appid, value, url)
            return Verdict(False, f"{value:016x}", None, 0)
        counts = keys.near_duplicate_hosts(appid, crawlid)
        write = self.client.pipeline(transaction=False)
        write.hget(keys.near_duplicate_first(appid), found.to_bytes(8, "big"))
        write.hincrby(counts, host, 1)
        write.expire(counts, self.ttl)
        first, count, _ = write.execute()
        first_url = first.decode("utf-8", "replace") if isinstance(first, bytes) else first
        return Verdict(True, f"{found:016x}", first_url or None, int(count))

    def add(self, appid: str, fingerprint: int, url: str, client: Any = None) -> None:
        """Index `fingerprint` (`client`: a pipeline, to add many in one round trip)."""
        names = [keys.near_duplicate_band(appid, i) for i in range(len(BAND_WIDTHS))]
        names.append(keys.near_duplicate_first(appid))
        args = [fingerprint.to_bytes(8, "big"), url if self.first_urls else "", self.ttl, *band_values(fingerprint)]
        self._add(keys=names, args=args, client=client)
