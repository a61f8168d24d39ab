"""An app's near-duplicate index in Redis: 64-bit SimHashes under 5 band hashes, with an idle TTL.

A page's SimHash is looked up and, when no indexed one is within NEAR_DUPLICATE_DISTANCE bits, added
(`near_duplicates.lua`, one round trip, atomic for every crawler). The index is per appid, so a
later crawl of the same app finds the pages of the earlier ones while the index lives
(NEAR_DUPLICATE_TTL after its last write). Each page costs 5 x 8 bytes of band entries (plus the hash
fields they share) and its first URL; docs/decisions/near-duplicates-in-redis-bands.md has the figures.
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


@dataclass(frozen=True)
class Verdict:
    """A page's place in the index: `cluster_id` (16 hex digits) and `duplicate_of` when near another."""

    near_duplicate: bool
    cluster_id: str
    duplicate_of: str | None
    host_near_duplicates: int  # near-duplicates the crawl has had from the page's host, this one included


class NearDuplicateIndex:
    def __init__(self, client: Any, ttl: int, distance: int) -> None:
        self.client, self.ttl, self.distance = client, ttl, distance
        self._lookup = client.register_script(_SCRIPT)

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> NearDuplicateIndex:
        return cls(client, settings.get_int("NEAR_DUPLICATE_TTL"), settings.get_int("NEAR_DUPLICATE_DISTANCE"))

    def check(self, appid: str, crawlid: str, fingerprint: str, url: str, host: str) -> Verdict:
        """Look `fingerprint` (16 hex digits) up; index it with `url` when it is near none."""
        raw = bytes.fromhex(fingerprint)
        names = [keys.near_duplicate_band(appid, i) for i in range(len(BAND_WIDTHS))]
        names += [keys.near_duplicate_first(appid), keys.near_duplicate_hosts(appid, crawlid)]
        args = [raw, url, host, self.ttl, self.distance, *band_values(int.from_bytes(raw, "big"))]
        found, first, count = self._lookup(keys=names, args=args)
        if not found:
            return Verdict(False, fingerprint, None, int(count))
        first_url = first.decode("utf-8", "replace") if isinstance(first, bytes) else first
        return Verdict(True, bytes(found).hex(), first_url or None, int(count))
