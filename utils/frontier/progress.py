"""A crawl's progress: its counters in Redis, pages/s and ETA, for the gateway, `feed --follow` and `status`.

The frontier scripts keep exact counters per crawl in `<sid>:crawl:<appid>:<crawlid>:progress`
(queued, inflight, retrying, enqueued, crawled, failed, dead, dropped_<reason>, started, updated,
finished). A crawl is finished when nothing of it is queued, in flight or waiting to retry.
Rates need two looks at the counters, so a `RateTracker` keeps the samples of one observer;
without samples the average since the crawl started is used. The ETA divides what is still
pending by the rate at which requests leave the frontier; found links keep adding work, so it is
a lower bound while a crawl grows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import redis
import ujson
from redis.exceptions import RedisClusterException

from utils import schemas
from utils.config.clients import RedisClient, redis_client
from utils.config.errors import InvalidMessage
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.shards import Shards

PENDING = ("queued", "inflight", "retrying")
PAGES = ("crawled", "failed", "dead")  # requests that ended as a page message or a dead letter
TIMES = ("started", "updated", "finished")
FOLLOW_APPEAR_TIMEOUT = 60.0  # seconds `feed --follow` waits for the kafka monitor to queue the crawl
FOLLOW_INTERVAL = 1.0  # seconds between two redraws of `feed --follow`
BAR_WIDTH = 24  # characters of a progress bar


@dataclass(frozen=True, order=True)
class CrawlRef:
    """Which crawl: the key parts of its progress hash."""

    spiderid: str
    appid: str
    crawlid: str

    @classmethod
    def from_member(cls, member: str | bytes) -> CrawlRef:
        """A member of `shoal:crawls`: `<spiderid>\\t<appid>\\t<crawlid>`."""
        text = member.decode() if isinstance(member, bytes) else member
        spiderid, appid, crawlid = text.split("\t", 2)
        return cls(spiderid, appid, crawlid)

    @property
    def key(self) -> str:
        return keys.crawl_progress(self.spiderid, self.appid, self.crawlid)


@dataclass(frozen=True)
class Progress:
    """One reading of a crawl's progress hash."""

    ref: CrawlRef
    counters: dict[str, int]
    times: dict[str, float]
    weight: float | None = None  # the fair-queuing weight its latest requests were queued with

    def count(self, name: str) -> int:
        return max(self.counters.get(name, 0), 0)

    @property
    def pending(self) -> int:
        return sum(self.count(name) for name in PENDING)

    @property
    def enqueued(self) -> int:
        return self.count("enqueued")

    @property
    def settled(self) -> int:
        """Requests that left the frontier for good (crawled, failed, dead, dropped at fetch)."""
        return max(self.enqueued - self.pending, 0)

    @property
    def pages(self) -> int:
        return sum(self.count(name) for name in PAGES)

    @property
    def finished(self) -> bool:
        return self.enqueued > 0 and self.pending == 0

    @property
    def dropped(self) -> dict[str, int]:
        return {k[len("dropped_") :]: v for k, v in sorted(self.counters.items()) if k.startswith("dropped_")}

    def average_rates(self, now: float) -> tuple[float, float]:
        """(pages/s, settled/s) since the crawl started; up to its last update once finished."""
        started = self.times.get("started")
        end = self.times.get("updated", now) if self.finished else now
        if started is None or end - started < 1.0:
            return 0.0, 0.0
        return self.pages / (end - started), self.settled / (end - started)


def parse(ref: CrawlRef, raw: dict[Any, Any]) -> Progress | None:
    """A Progress from HGETALL's answer; None when the hash does not exist."""
    if not raw:
        return None
    counters: dict[str, int] = {}
    times: dict[str, float] = {}
    weight = None
    for name, value in raw.items():
        name = name.decode() if isinstance(name, bytes) else name
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            if name in TIMES:
                times[name] = float(text)
            elif name == "weight":
                weight = float(text)
            else:
                counters[name] = int(text)
        except ValueError:
            continue  # spiderid, appid, crawlid: already in the ref
    return Progress(ref, counters, times, weight)


def read_many(client: RedisClient, refs: Iterable[CrawlRef], shards: Shards | None = None) -> list[Progress | None]:
    """Each crawl's progress in one round trip, summed over the frontier's shards."""
    refs, tags = list(refs), (shards or Shards.for_client(client)).tags
    if not refs:
        return []
    pipe = client.pipeline(transaction=False)
    for ref in refs:
        for tag in tags:
            pipe.hgetall(tag + ref.key)
    raws = pipe.execute()
    found = []
    for i, ref in enumerate(refs):
        parts = [p for p in (parse(ref, raw) for raw in raws[i * len(tags) : (i + 1) * len(tags)]) if p is not None]
        found.append(merge(ref, parts))
    return found


def read(client: RedisClient, ref: CrawlRef, shards: Shards | None = None) -> Progress | None:
    return read_many(client, [ref], shards)[0]


def merge(ref: CrawlRef, parts: list[Progress]) -> Progress | None:
    """One crawl's progress from its shards' hashes: counters added, first start, last update."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    counters: dict[str, int] = {}
    times: dict[str, float] = {}
    for part in parts:
        for name, n in part.counters.items():
            counters[name] = counters.get(name, 0) + n
        for name, at in part.times.items():
            times[name] = min(times.get(name, at), at) if name == "started" else max(times.get(name, at), at)
    weights = [part.weight for part in parts if part.weight is not None]
    return Progress(ref, counters, times, max(weights) if weights else None)


def live_crawls(client: RedisClient, since: float, limit: int = 200) -> list[CrawlRef]:
    """Crawls that queued something after `since`, most recent first (`shoal:crawls`, no SCAN)."""
    members = client.zrevrangebyscore(keys.CRAWLS, "+inf", since, start=0, num=limit)
    return [CrawlRef.from_member(m) for m in members]


def find(client: RedisClient, appid: str, crawlid: str, spiderid: str | None = None) -> CrawlRef | None:
    """The crawl's ref; without a spiderid each known spider is tried (`shoal:spiders`, small)."""
    if spiderid:
        candidates = [spiderid]
    else:
        candidates = sorted(s.decode() if isinstance(s, bytes) else s for s in client.smembers(keys.SPIDERS))
    pipe = client.pipeline(transaction=False)
    refs = [CrawlRef(sid, appid, crawlid) for sid in candidates]
    for ref in refs:
        pipe.exists(ref.key)
    found = [ref for ref, exists in zip(refs, pipe.execute(), strict=True) if exists]
    return found[0] if found else None


class RateTracker:
    """Pages/s and settled/s of one crawl over the last `window` seconds of samples."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.samples: deque[tuple[float, int, int]] = deque()

    def add(self, now: float, progress: Progress) -> None:
        self.samples.append((now, progress.pages, progress.settled))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()

    def rates(self) -> tuple[float, float] | None:
        """(pages/s, settled/s), or None before two samples a second apart."""
        if len(self.samples) < 2:
            return None
        (t0, pages0, settled0), (t1, pages1, settled1) = self.samples[0], self.samples[-1]
        if t1 - t0 < 1.0:
            return None
        return max(pages1 - pages0, 0) / (t1 - t0), max(settled1 - settled0, 0) / (t1 - t0)


def snapshot(progress: Progress, tracker: RateTracker | None = None, now: float | None = None) -> dict[str, Any]:
    """The JSON view of a crawl's progress: counters, percent, pages/s, ETA, finished."""
    now = time.time() if now is None else now
    measured = None if tracker is None or progress.finished else tracker.rates()
    pages_rate, settle_rate = measured or progress.average_rates(now)
    if progress.finished:
        eta: float | None = 0.0
    else:
        eta = progress.pending / settle_rate if settle_rate > 0 else None
    started = progress.times.get("started")
    end = progress.times.get("updated", now) if progress.finished else now
    return {
        "spiderid": progress.ref.spiderid,
        "appid": progress.ref.appid,
        "crawlid": progress.ref.crawlid,
        **{name: progress.count(name) for name in (*PENDING, "enqueued", *PAGES)},
        "dropped": progress.dropped,
        "near_duplicates": progress.count("near_duplicates"),  # pages whose text was near one already seen
        "pending": progress.pending,
        "done": progress.settled,
        "percent": round(100.0 * progress.settled / progress.enqueued, 1) if progress.enqueued else 0.0,
        "pages_per_sec": round(pages_rate, 2),
        "eta_sec": None if eta is None else round(eta, 1),
        "finished": progress.finished,
        "started": started,
        "updated": progress.times.get("updated"),
        "finished_at": progress.times.get("finished"),
        "elapsed_sec": round(max(end - started, 0.0), 1) if started else None,
        "weight": progress.weight,
    }


# --- terminal ------------------------------------------------------------------------------------
def bar(percent: float, width: int = BAR_WIDTH) -> str:
    filled = round(width * min(max(percent, 0.0), 100.0) / 100)
    return "█" * filled + "░" * (width - filled)


def clock(seconds: float | None) -> str:
    """`1:02:03` or `2:03`; `?` when unknown."""
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_line(snap: dict[str, Any]) -> str:
    """One crawl on one line: bar, percent, counters, pages/s, ETA (or `done`)."""
    name = f"{snap['appid']}/{snap['crawlid']}"
    tail = f"done in {clock(snap['elapsed_sec'])}" if snap["finished"] else f"ETA {clock(snap['eta_sec'])}"
    return (
        f"{name} [{bar(snap['percent'])}] {snap['percent']:5.1f}%  {snap['done']}/{snap['enqueued']}  "
        f"crawled {snap['crawled']} queued {snap['queued']} inflight {snap['inflight']} "
        f"retrying {snap['retrying']} failed {snap['failed'] + snap['dead']}  "
        f"{snap['pages_per_sec']:.1f} pages/s  {tail}"
    )


def render_crawls(settings: Settings, now: float | None = None) -> str:
    """The running crawls of the cluster as lines with progress bars (`shoal status`)."""
    now = time.time() if now is None else now
    from utils.frontier import memory, tier  # `shoal status` only

    client = redis_client(settings)
    shards = Shards.from_settings(settings)
    try:
        refs = live_crawls(client, now - settings.get_int("CRAWL_STATE_TIMEOUT"))
        progresses = [p for p in read_many(client, refs, shards) if p is not None]
        running = [p for p in progresses if not p.finished]
        sizes = {p.ref: memory.crawl_bytes(client, p.ref, shards) for p in running}
        lines = [memory.describe(memory.redis_memory(client), sum(p.pending for p in progresses))]
        if tier.configured(settings):
            lines.append(tier.describe(client, shards))
    except (redis.ConnectionError, redis.TimeoutError, RedisClusterException) as exc:
        return f"crawls: unknown, Redis does not answer ({exc})"
    finally:
        client.close()
    finished = len(progresses) - len(running)
    lines.append(f"crawls: {len(running)} running, {finished} finished recently")
    for p in running:
        own = f" · {sizes[p.ref] / p.pending:,.0f} B of Redis per request" if p.pending else ""
        lines.append("  " + format_line(snapshot(p, now=now)) + own)
    return "\n".join(lines)


# --- shoal feed --follow -------------------------------------------------------------------------
def crawls_in(messages: Iterable[str]) -> list[CrawlRef]:
    """The distinct crawls that valid crawl requests among `messages` (JSON lines) start."""
    found: dict[CrawlRef, None] = {}
    for line in messages:
        try:
            request = schemas.validate("crawl", ujson.loads(line))
        except (ValueError, InvalidMessage):
            continue
        found[CrawlRef(request["spiderid"], request["appid"], request["crawlid"])] = None
    return list(found)


def _fed_lines(args: argparse.Namespace) -> Iterator[str]:
    if args.json and args.json != "-":
        yield args.json
    elif args.file:
        with open(args.file) as lines:
            yield from (line.strip() for line in lines if line.strip())


class _Screen:
    """Redraws a block of lines in place on a terminal; elsewhere prints each changed block."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.shown: list[str] = []

    def draw(self, lines: list[str]) -> None:
        if lines == self.shown:
            return
        if self.tty and self.shown:
            self.out.write(f"\x1b[{len(self.shown)}F")
        self.out.write("".join(f"\x1b[2K{line}\n" if self.tty else f"{line}\n" for line in lines))
        self.out.flush()
        self.shown = lines


def follow(
    client: RedisClient,
    refs: list[CrawlRef],
    out: TextIO,
    window: float,
    interval: float = FOLLOW_INTERVAL,
    appear_timeout: float = FOLLOW_APPEAR_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    shards: Shards | None = None,
) -> int:
    """Redraw the crawls' progress until all are finished: 0; 1 if one never appeared."""
    trackers = {ref: RateTracker(window) for ref in refs}
    screen, deadline = _Screen(out), time.monotonic() + appear_timeout
    while True:
        now = time.time()
        progresses = read_many(client, refs, shards)
        lines = []
        for ref, progress in zip(refs, progresses, strict=True):
            if progress is None:
                lines.append(f"{ref.appid}/{ref.crawlid}: waiting for the crawl to be queued...")
                continue
            trackers[ref].add(now, progress)
            lines.append(format_line(snapshot(progress, trackers[ref], now)))
        screen.draw(lines)
        if all(p is not None and p.finished for p in progresses):
            return 0
        if any(p is None for p in progresses) and time.monotonic() > deadline:
            out.write(f"gave up: a crawl was not queued within {appear_timeout:.0f} s (is a kafka monitor running?)\n")
            return 1
        sleep(interval)


def follow_command(settings: Settings, args: argparse.Namespace, fed: Iterable[str] | None = None) -> int:
    """`shoal feed --follow`: the progress of the crawls just fed, until they finish."""
    refs = crawls_in(fed if fed is not None else _fed_lines(args))
    if not refs:
        print("--follow: no crawl request to follow (give it as an argument or with -f FILE)")
        return 2
    client = redis_client(settings)
    try:
        return follow(
            client, refs, sys.stdout, settings.get_float("REST_RATE_WINDOW"), shards=Shards.from_settings(settings)
        )
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()
