"""The disk tier: deep queues keep a window in Redis and their tail in PostgreSQL (FRONTIER_DISK_TIER_DSN).

enqueue.lua puts a request past its domain's window into the shard's spill stream (lua/lib/tier.lua);
this module moves it on, one shard at a time under that shard's advisory lock in PostgreSQL, so the
moves of a shard never overlap whichever process makes them (the redis monitors' mover, stop,
expire, info). Holding the lock, a process first finishes what a killed one left (`recover`):
- drain: COPY stream entries into the table, commit, then trim them off the stream (tier_trim.lua).
  Killed between the two, the entries are copied again and add nothing (ON CONFLICT DO NOTHING).
- refill: select a domain's best rows (its queue order: score, member), put them into its queue
  with a ledger entry (tier_refill.lua), delete them, commit, drop the ledger entry. Killed before
  the commit, the rows are in Redis and the ledger names their stale copies, which `recover` deletes
  before any drain could copy one of them back: nothing lost, nothing twice.
- purge (stop, expire): the same with tier_forget.lua, which takes the rows out of the counts.
A shard's `tails` hash counts each domain's tail, so `info`, the progress counters (a request in
the tail stays `queued`) and pop.lua's refill trigger need no PostgreSQL read.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
import ujson
from psycopg import conninfo

from utils.config.clients import RedisClient
from utils.config.postgres import APPLICATION_NAME, TCP_OPTIONS
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.progress import CrawlRef
from utils.frontier.scripts import source
from utils.frontier.shards import Shards, spider_shards
from utils.frontier.tier_store import TailStore

log = logging.getLogger(__name__)

DRAIN_BATCH = 5000  # stream entries per COPY
REFILL_DOMAINS = 500  # low domains looked at per shard and round
PURGE_CHUNK = 5000  # rows per purge transaction
SWEEP_EVERY = 10.0  # seconds between two sweeps for low windows no pop listed (a purge emptied them)


def configured(settings: Settings) -> bool:
    return bool(settings.get_str("FRONTIER_DISK_TIER_DSN"))


class DiskTier:
    """The tier's moves over one Redis client (decoding replies to str) and one PostgreSQL connection
    (made on first use)."""

    def __init__(self, client: RedisClient, conninfo: str, window: int, shards: Shards | None = None,
                 table: str = "frontier_tail", partitions: int = 16, state_ttl: int = 86400) -> None:  # fmt: skip
        self.client = client
        self.conninfo = conninfo
        self.window = window
        self.shards = shards or Shards.for_client(client)
        self.table, self.partitions, self.state_ttl = table, partitions, state_ttl
        self.refill_script = client.register_script(source("tier_refill"))
        self.trim_script = client.register_script(source("tier_trim"))
        self.forget_script = client.register_script(source("tier_forget"))
        self._store: TailStore | None = None
        self.swept_at = 0.0

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient) -> DiskTier:
        return cls(
            client,
            settings.get_str("FRONTIER_DISK_TIER_DSN"),
            settings.get_int("FRONTIER_WINDOW"),
            Shards.from_settings(settings),
            settings.get_str("FRONTIER_DISK_TIER_TABLE"),
            settings.get_int("FRONTIER_DISK_TIER_PARTITIONS"),
            settings.get_int("CRAWL_STATE_TIMEOUT"),
        )

    @property
    def store(self) -> TailStore:
        if self._store is None:
            target = conninfo.make_conninfo(self.conninfo, application_name=APPLICATION_NAME, **TCP_OPTIONS)
            conn = psycopg.connect(target, autocommit=False)
            store = TailStore(conn, self.table)
            store.create(self.partitions)
            self._store = store
        return self._store

    def close(self) -> None:
        """Drop the connection (and with it every lock it held); the next use connects again."""
        if self._store is not None:
            try:
                self._store.conn.close()
            finally:
                self._store = None

    # --- the lock ----------------------------------------------------------------------------------
    @contextmanager
    def locked(self, sid: str, wait: bool = True) -> Iterator[bool]:
        """Hold the shard's lock (yields False when `wait` is off and another holds it), recovered."""
        store = self.store
        if not store.lock(sid, wait):
            yield False
            return
        try:
            self.recover(sid)
            yield True
        finally:
            if not store.conn.closed:
                store.conn.rollback()
                store.unlock(sid)

    def recover(self, sid: str) -> int:
        """Delete the stale rows a killed mover's ledger names; the rows deleted."""
        deleted = 0
        for batch, rows in self.client.hgetall(keys.tier_ledger(sid)).items():
            deleted += self.store.delete(sid, [(str(d), str(m)) for d, m in ujson.loads(rows)])
            self.store.conn.commit()
            self.client.hdel(keys.tier_ledger(sid), batch)
        return deleted

    # --- the moves (the caller holds the shard's lock) ---------------------------------------------
    def drain(self, sid: str, batch: int = DRAIN_BATCH, rounds: int = 1000) -> int:
        """Move the spill stream into PostgreSQL, `batch` entries a transaction; the entries moved."""
        moved = 0
        for _ in range(rounds):
            entries = self.client.xrange(keys.tier_spill(sid), count=batch)
            if not entries:
                break
            self.store.insert((sid, f["d"], float(f["s"]), f["m"], f["c"], f["p"]) for _, f in entries)
            self.store.conn.commit()
            self.trim_script(keys=[keys.shard_route(_tag(sid))], args=[sid, entries[-1][0]])
            moved += len(entries)
            if len(entries) < batch:
                break
        return moved

    def refill(self, sid: str, domains: list[str]) -> int:
        """Top the domains' windows up from their tails, in one transaction; the requests moved (a row
        behind an entry of its domain still in the spill stream waits for the next drain)."""
        pipe = self.client.pipeline(transaction=False)
        for d in domains:
            pipe.zcard(keys.queue(sid, d))
        pipe.hmget(keys.tier_tails(sid), domains)
        *sizes, tails = pipe.execute()
        wanted = {
            d: self.window - int(n) for d, n, t in zip(domains, sizes, tails, strict=True) if t and n < self.window
        }
        done = [d for d in domains if d not in wanted]
        if done:
            self.client.srem(keys.tier_low(sid), *done)
        if not wanted:
            return 0
        rows = self.store.best_of(sid, wanted)
        batch = uuid.uuid4().hex
        args: list[Any] = [sid, batch]
        for d, found in rows.items():
            args += [d, len(found)]
            for score, member, payload in found:
                args += [repr(score), member, payload]
        counts = self.refill_script(keys=[keys.shard_route(_tag(sid))], args=args)
        moved = [(d, m) for (d, found), n in zip(rows.items(), counts, strict=True) for _, m, _ in found[: int(n)]]
        self.store.delete(sid, moved)
        self.store.conn.commit()
        self.client.hdel(keys.tier_ledger(sid), batch)
        return len(moved)

    def refill_low(self, sid: str, limit: int = REFILL_DOMAINS) -> int:
        """Refill the domains pop.lua listed as low; the requests moved."""
        domains = self.client.srandmember(keys.tier_low(sid), limit)
        return self.refill(sid, list(domains)) if domains else 0

    def sweep(self, sid: str) -> int:
        """List every domain with a tail whose window is at half or less (a purge or a reap can empty
        a window without a pop); the domains listed."""
        listed = 0
        names = [d for d, _ in self.client.hscan_iter(keys.tier_tails(sid), count=1000)]
        for start in range(0, len(names), 1000):
            chunk = names[start : start + 1000]
            pipe = self.client.pipeline(transaction=False)
            for d in chunk:
                pipe.zcard(keys.queue(sid, d))
            low = [d for d, n in zip(chunk, pipe.execute(), strict=True) if int(n) <= self.window // 2]
            if low:
                listed += int(self.client.sadd(keys.tier_low(sid), *low))
        return listed

    def sweep_spider(self, spiderid: str) -> int:
        """`sweep` every shard of a spider (after a purge emptied windows whose tails are on disk)."""
        return sum(self.sweep(sid) for _, sid in spider_shards([spiderid], self.shards))

    def round(self, spiders: list[str], now: float) -> int:
        """One mover round over every shard of every spider whose lock is free: drain, then refill."""
        work = 0
        sweep = now - self.swept_at >= SWEEP_EVERY
        for _, sid in spider_shards(spiders, self.shards):
            with self.locked(sid, wait=False) as held:
                if not held:
                    continue
                work += self.drain(sid, rounds=20)
                if sweep:
                    self.sweep(sid)
                work += self.refill_low(sid)
        if sweep:
            self.swept_at = now
        return work

    # --- stop, expire, info --------------------------------------------------------------------------
    def purge(self, ref: CrawlRef, reason: str) -> int:
        """Take a stopped or expired crawl's requests out of the tail; the requests removed."""
        total = 0
        for tag in self.shards.tags:
            sid = tag + ref.spiderid
            code = self.client.hget(keys.crawl_codes(sid), f"{ref.appid}\t{ref.crawlid}")
            if code is None:
                continue
            with self.locked(sid):
                self.drain(sid)
                while rows := self.store.of_crawl(sid, code, PURGE_CHUNK):
                    batch = uuid.uuid4().hex
                    args = [sid, batch, ref.appid, ref.crawlid, reason, self.state_ttl, *(v for r in rows for v in r)]
                    self.forget_script(keys=[keys.shard_route(tag)], args=args)
                    self.store.delete(sid, rows)
                    self.store.conn.commit()
                    self.client.hdel(keys.tier_ledger(sid), batch)
                    total += len(rows)
        return total

    @contextmanager
    def holding(self, spiderid: str) -> Iterator[None]:
        """Hold the locks of every shard of a spider (in one order, so two holders never deadlock),
        each recovered and drained: no request moves between tiers meanwhile (info reads both)."""
        with ExitStack() as stack:
            for _, sid in sorted(spider_shards([spiderid], self.shards)):
                stack.enter_context(self.locked(sid))
                self.drain(sid)
            yield

    def crawl_domains(self, ref: CrawlRef) -> dict[str, tuple[int, int, int]]:
        """Each domain's requests of the crawl in the tail, (count, high priority, low priority);
        under `holding`."""
        found: dict[str, tuple[int, int, int]] = {}
        for tag in self.shards.tags:
            sid = tag + ref.spiderid
            code = self.client.hget(keys.crawl_codes(sid), f"{ref.appid}\t{ref.crawlid}")
            if code is not None:
                for domain, n, best, worst in self.store.crawl_domains(sid, code):
                    found[domain] = (n, int(-best), int(-worst))
        self.store.conn.rollback()
        return found

    def figures(self, spiders: list[str]) -> dict[str, int]:
        return figures(self.client, spiders, self.shards)


def figures(client: RedisClient, spiders: list[str], shards: Shards) -> dict[str, int]:
    """The tier's counters summed over shards: spilled, refilled, dry, tails (requests on disk or
    on their way there)."""
    out = {"spilled": 0, "refilled": 0, "dry": 0, "tails": 0}
    for _, sid in spider_shards(spiders, shards):
        state = {_text(k): int(v) for k, v in client.hgetall(keys.tier_state(sid)).items()}
        for name in ("spilled", "refilled", "dry"):
            out[name] += state.get(name, 0)
        out["tails"] += sum(int(v) for v in client.hvals(keys.tier_tails(sid)))
    return out


def describe(client: RedisClient, shards: Shards) -> str:
    """One line for `shoal status`."""
    spiders = sorted(_text(s) for s in client.smembers(keys.SPIDERS))
    found = figures(client, spiders, shards)
    return (f"disk tier: {found['tails']:,} requests on disk; {found['spilled']:,} spilled, "
            f"{found['refilled']:,} refilled, {found['dry']:,} windows ran dry")  # fmt: skip


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _tag(sid: str) -> str:
    """The shard tag in front of a shard's spiderid ('' on one Redis)."""
    return sid[: sid.index("}") + 1] if sid.startswith("{") else ""
