"""Fingerprints this process has seen Redis's dupefilter take: most found links are duplicates.

On a typical site ~85 % of the links a page yields were seen before in the crawl. Each of them
used to be turned into a stored record, JSON-encoded, shipped to Redis and dropped there by the
enqueue script. A link whose fingerprint Redis already holds for its crawl (this process wrote it
and read the answer) is dropped here instead, and counted in Redis' progress as `dropped_duplicate`
in the next flush, so the counters stay exact. An entry is trusted for half of DUPEFILTER_TIMEOUT
after Redis last saw it, so the Redis dupefilter never expires while this cache still relies on it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

Key = tuple[str, str, str, bytes]  # spiderid, appid, crawlid, fingerprint

MAX_ENTRIES = 500_000  # ~100 MB at most; older entries go first


class RecentFingerprints:
    def __init__(self, max_age: float, max_entries: int = MAX_ENTRIES, clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self.max_entries = max_entries
        self.clock = clock
        self._seen: OrderedDict[Key, float] = OrderedDict()

    def __contains__(self, key: Key) -> bool:
        when = self._seen.get(key)
        if when is None:
            return False
        if self.clock() - when > self.max_age:
            del self._seen[key]
            return False
        return True

    def add(self, key: Key) -> None:
        """Redis confirmed that its dupefilter holds this fingerprint (queued, duplicate, page_limit)."""
        self._seen[key] = self.clock()
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)
