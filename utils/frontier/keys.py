"""Every Redis key Shoal uses, as one function each.

Names that Scrapy Cluster 1.3 defines are kept (reference §5): `<spiderid>:<domain>:queue`,
`<spiderid>:dupefilter:<crawlid>`, `timeout:<spiderid>:<appid>:<crawlid>` and the `stats:` heartbeats;
throttle keys keep Scrapy Cluster's `[<spider>:][<ip>:]<domain>` but hold one hash each (`:throttle`)
instead of a window ZSET and a time string, so a pop reads a domain's throttle with one command.
Keys Shoal adds sit next to them under the same spider prefix.
The Lua scripts in utils/frontier/lua build the same names with the lib `K` generated from this module
(utils/frontier/lua_libs.py); `tests/integration/test_frontier_lua_libs.py` checks they agree.
"""

from __future__ import annotations

SPIDERS = "shoal:spiders"  # SET of spider ids that ever had queued requests


def queue(spiderid: str, domain: str) -> str:
    """ZSET of queued requests, score -priority. A member is `v`, the crawl's virtual finish tag on the
    domain (12 hex digits, lua/lib/fair.lua: equal priorities come out fairly between crawls, each
    crawl's oldest first), the request id (16 hex digits: server time in µs + a counter), then its
    crawl's code (`crawl_codes`), which says in which crawl's `requests` hash its payload is (under
    the member without its code). An older Shoal's members have no tag (lua/lib/member.lua)."""
    return f"{spiderid}:{domain}:queue"


def fair(spiderid: str, domain: str) -> str:
    """HASH of a domain's fair-queuing state (lua/lib/fair.lua): `<crawl code> <class>` -> the last
    virtual finish tag the crawl got there, `\t<class>` -> the highest; deleted when the queue empties."""
    return f"{spiderid}:{domain}:fair"


def crawl_requests(spiderid: str, appid: str, crawlid: str, domain: str) -> str:
    """HASH queue member without its crawl code (tag and request id) -> stored request
    (utils/frontier/crawl_request.py) of one crawl's
    queued, delayed and in-flight requests on one domain. A domain's share of a crawl is small enough
    for Redis's listpack encoding (~100 B a request instead of ~180 in one crawl-wide hash table)."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:requests:{domain}"


def crawl_domains(spiderid: str, appid: str, crawlid: str) -> str:
    """SET of the domains where a crawl has stored requests (`crawl_requests`): the crawl's index, so
    info and stop cost O(requests of the crawl)."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:domains"


def crawl_profiles(spiderid: str, appid: str, crawlid: str) -> str:
    """HASH profile id (hex) -> JSON of crawl-level fields (attrs, regexes, cookie, maxdepth, ...) that
    the crawl's stored requests share and name by that id; `#<sha1 of the JSON>` -> its id; `#` counts ids."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:profiles"


def legacy_crawl_requests(spiderid: str, appid: str, crawlid: str) -> str:
    """HASH `<request id><domain>` -> request JSON: where an older Shoal kept a crawl's requests, read only
    by utils/frontier/upgrade.py, which moves them into `crawl_requests`."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:requests"


def crawl_codes(spiderid: str) -> str:
    """HASH `<appid>\t<crawlid>` -> the crawl's short code (hex) in queue members; field `\tseq`
    is the counter that hands codes out."""
    return f"{spiderid}:crawl_codes"


def crawl_names(spiderid: str) -> str:
    """HASH code -> `<appid>\t<crawlid>`: the way back from a queue member to its crawl."""
    return f"{spiderid}:crawl_names"


def heads(spiderid: str) -> str:
    """ZSET domain -> score of its queue's best request: the domain registry of a spider."""
    return f"{spiderid}:heads"


def wake(spiderid: str) -> str:
    """LIST holding at most one token, pushed when the spider's queues gain work (lib/wake.lua):
    an idle crawler blocks on it (BLPOP) and pops at once, instead of polling."""
    return f"{spiderid}:wake"


def line(spiderid: str) -> str:
    """ZSET `<13-hex µs when it is next due><domain>` -> the domain's best queue score: every domain with
    queued requests, each class (score) in the order its domains fall due (utils/frontier/lua/lib/domain_sets.lua)."""
    return f"{spiderid}:line"


def line_of(spiderid: str) -> str:
    """HASH domain -> its member in `line`, then (under the spider's own throttle prefix) its throttle state."""
    return f"{spiderid}:line_of"


def classes_ready(spiderid: str) -> str:
    """ZSET class -> its score: the classes of `line` whose first domain is due."""
    return f"{spiderid}:classes_ready"


def classes_snoozed(spiderid: str) -> str:
    """ZSET class -> unix time its first domain falls due: the other classes of `line`."""
    return f"{spiderid}:classes_snoozed"


def policy(spiderid: str) -> str:
    """HASH of pop.lua's own state: the throttle overrides it last saw, its self-repair cursors."""
    return f"{spiderid}:policy"


def inflight(spiderid: str) -> str:
    """ZSET `<domain>\\t<queue member>` -> lease deadline (unix seconds)."""
    return f"{spiderid}:inflight"


def app_leases(spiderid: str) -> str:
    """HASH appid -> the app's requests leased from this shard and not settled yet (lua/lib/app_limits.lua):
    what its max_inflight quota is checked against where requests are leased, and the apps' slot shares
    (on a Redis Cluster each pop hands it back to the pop planner)."""
    return f"{spiderid}:app_leases"


def app_pace(spiderid: str) -> str:
    """HASH appid -> the app's next lease time (unix s, GCRA) under its pages_per_minute quota
    (lua/lib/app_limits.lua)."""
    return f"{spiderid}:app_pace"


def ladder_levels(spiderid: str) -> str:
    """HASH domain -> `<level>:<until unix s>`: each domain's ladder level above 0 as its crawlers
    last wrote it with its pace (ladder_pace.lua), next to the queues so pop.lua stamps every lease
    with the level its throttle was spent at (the ladder's own keys are in another slot)."""
    return f"{spiderid}:ladder_levels"


def dupefilter(spiderid: str, crawlid: str) -> str:
    """SET of 8-byte request fingerprints of one crawl; idle expiry DUPEFILTER_TIMEOUT."""
    return f"{spiderid}:dupefilter:{crawlid}"


def crawl_progress(spiderid: str, appid: str, crawlid: str) -> str:
    """HASH of a crawl's progress counters (queued, inflight, crawled, failed, dropped_*)."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:progress"


def domain_pages(spiderid: str, domain: str, crawlid: str) -> str:
    """Counter of requests admitted for one crawl and domain (domain_max_pages)."""
    return f"{spiderid}:domain_max_page_filter:{domain}:{crawlid}"


def global_pages(spiderid: str, domain: str, crawlid: str) -> str:
    """Counter of requests admitted for one crawl and domain (GLOBAL_PAGE_PER_DOMAIN_LIMIT)."""
    return f"{spiderid}:global_page_count_filter:{domain}:{crawlid}"


def stopped(spiderid: str) -> str:
    """ZSET `<appid>||<crawlid>` -> time until which that crawl's new children are refused."""
    return f"{spiderid}:blacklist"


def timeout(spiderid: str, appid: str, crawlid: str) -> str:
    """String: the unix time at which a crawl expires (Scrapy Cluster's `expires`)."""
    return f"timeout:{spiderid}:{appid}:{crawlid}"


def throttle_key(domain: str, spiderid: str | None = None, public_ip: str | None = None) -> str:
    """`[<spider>:][<public_ip>:]<domain>` as in Scrapy Cluster's throttle (reference §7)."""
    return "".join(f"{part}:" for part in (spiderid, public_ip) if part) + domain


def throttle_prefix(key: str, domain: str) -> str:
    """The prefix of the throttle key `key` (`<prefix><domain>`): '', '<spider>:', '<ip>:' or
    '<spider>:<ip>:'."""
    if not key.endswith(domain):
        raise ValueError(f"throttle key {key!r} does not end with its domain {domain!r}")
    return key[: len(key) - len(domain)]


def throttles(prefix: str) -> str:
    """HASH domain -> throttle state (utils/frontier/throttle_state.py) of every domain under the
    throttle prefix `prefix`, shared by every spider: hits in the window, moderated slot, pause
    (Retry-After, Crawl-delay), Crawl-delay. Under a spider's own prefix, a domain in the spider's
    line carries its state in `line_of` instead (throttle_state.spider_of_prefix)."""
    return f"{prefix}throttles"


def throttle_states(key: str, domain: str) -> str:
    """`throttles` of the prefix of the throttle key `key` (`<prefix><domain>`)."""
    return throttles(throttle_prefix(key, domain))


def spider_throttle_prefix(spiderid: str) -> str:
    """A spider's own throttle prefix, `<spiderid>:` (SCHEDULER_TYPE_ENABLED without the IP): the
    one prefix whose states its line may carry (docs/concepts/frontier.md, "Where a domain's
    throttle state is")."""
    return f"{spiderid}:"


def ingest_marks(topic: str, partition: int) -> str:
    """ZSET `<offset>:<message fingerprint>` -> offset: the messages of a topic partition a kafka
    monitor already wrote (enqueue.lua), so only the very same message is skipped on replay."""
    return f"shoal:ingest:{topic}:{partition}:marks"


def heartbeat(component: str, host: str, process_id: str) -> str:
    """`stats:<component>:self:<host>:<id>` (kafka-monitor, redis-monitor, rest)."""
    return f"stats:{component}:self:{host}:{process_id}"


def crawler_heartbeat(host: str, spiderid: str, process_id: str) -> str:
    """`stats:crawler:<host>:<spiderid>:<id>`: five segments, as Scrapy Cluster's parser expects."""
    return f"stats:crawler:{host}:{spiderid}:{process_id}"


RENDERERS = "shoal:renderers"  # ZSET `<host>:<id>` -> last report (unix s): live render processes


def render_figures(host: str, process_id: str) -> str:
    """`stats:render:<host>:<id>`: HASH of a render process's figures (pages/s, memory), with a TTL."""
    return f"stats:render:{host}:{process_id}"


# --- Disk tier (utils/frontier/tier.py; FRONTIER_DISK_TIER_DSN) ----------------------------------
def tier_spill(spiderid: str) -> str:
    """STREAM of requests leaving a domain's window for the disk tier, not yet in PostgreSQL: fields `d`
    domain, `s` queue score, `m` queue member, `c` crawl code, `p` stored request (lua/lib/tier.lua)."""
    return f"{spiderid}:tier:spill"


def tier_tails(spiderid: str) -> str:
    """HASH domain -> how many of its queued requests are in the disk tier (spill stream + PostgreSQL)."""
    return f"{spiderid}:tier:tails"


def tier_low(spiderid: str) -> str:
    """SET of domains whose window fell to half while their tail is on disk: the mover refills them."""
    return f"{spiderid}:tier:low"


def tier_ledger(spiderid: str) -> str:
    """HASH batch id -> JSON [[domain, member], ...]: PostgreSQL rows already moved out of the tail
    (refilled into Redis or purged) whose DELETE may not have committed; the mover deletes them first."""
    return f"{spiderid}:tier:ledger"


def tier_state(spiderid: str) -> str:
    """HASH of the tier's figures: `window` (requests per domain in Redis), `dry` (a window emptied
    while its tail was on disk), `spilled`, `refilled`."""
    return f"{spiderid}:tier"


# --- Crawl registry, retries, dead letters, jobs -------------------------------------------------
CRAWLS = "shoal:crawls"  # ZSET `<spiderid>\t<appid>\t<crawlid>` -> last enqueue (unix s): live crawls
JOBS = "shoal:jobs"  # STREAM of action/stats/zookeeper jobs, written by kafka monitors
JOBS_GROUP = "redis-monitors"  # the consumer group of the redis monitors on JOBS


def crawl_member(spiderid: str, appid: str, crawlid: str) -> str:
    """A crawl's member in CRAWLS."""
    return f"{spiderid}\t{appid}\t{crawlid}"


def delayed(spiderid: str) -> str:
    """ZSET `<domain>\\t<queue member>` -> not-before time: requests waiting to retry."""
    return f"{spiderid}:delayed"


def dead_letters(spiderid: str, appid: str, crawlid: str) -> str:
    """LIST of a crawl's dead-letter records (JSON, newest first, bounded, with a TTL)."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:dead"


def job_marker(origin: str) -> str:
    """String set once per incoming message that became a job, so a replay adds no second job.

    Its hash tag is the jobs stream's name, so add_job.lua's two keys share a Redis Cluster slot."""
    return f"shoal:job:{{{JOBS}}}:{origin}"


TIMEOUTS = "shoal:timeouts"  # ZSET `<spiderid>\t<appid>\t<crawlid>` -> expiry (unix s): crawls with `expires`


def shard_route(tag: str) -> str:
    """A key in a frontier shard's slot (never written): what a Redis Cluster client routes that
    shard's script calls by. On one Redis (tag '') it is only the scripts' KEYS[1]."""
    return f"{tag}shoal:frontier"


def rest_poll(uuid: str) -> str:
    """String: an answer the REST gateway keeps for `/poll` (with a TTL, unlike Scrapy Cluster)."""
    return f"rest:poll:{uuid}"


def dupefilter_stages(spiderid: str, crawlid: str) -> str:
    """HASH of a crawl's self-sizing dupefilter past its exact part (DUPEFILTER_MODE auto,
    lua/lib/seen.lua): `n` stages, `a` URLs in the newest, each stage's `m<i>` bits, `k<i>` hashes, `c<i>` capacity."""
    return f"{spiderid}:dupefilter:{crawlid}:stages"


def dupefilter_stage(spiderid: str, crawlid: str, stage: str | int) -> str:
    """Bitmap of Bloom stage `stage` of a crawl's self-sizing dupefilter; idle expiry as the exact one."""
    return f"{spiderid}:dupefilter:{crawlid}:stage:{stage}"


def bloom_dupefilter(spiderid: str, crawlid: str) -> str:
    """Bitmap of a crawl's Bloom-filter dupefilter (DUPEFILTER_MODE bloom), idle expiry as the exact one."""
    return f"{spiderid}:dupefilter:{crawlid}:bloom"


def sitemap_seen(spiderid: str, appid: str, crawlid: str, sitemap_id: str) -> str:
    """HASH entry URL -> its lastmod at the last poll (unix s, 0 = none) of one sitemap of one crawl
    (`sitemap_id`: 16 hex digits of the sitemap URL's fingerprint), plus the sitemap's own validators
    (fields `\\tetag`, `\\tlast_modified`); expires SITEMAP_STATE_TTL after the last poll (issue 31)."""
    return f"{spiderid}:crawl:{appid}:{crawlid}:sitemap:{sitemap_id}"


# --- Block escalation ladder (issue 33; utils/frontier/ladder.py) --------------------------------
def ladder(spiderid: str, domain: str) -> str:
    """HASH of a domain's ladder state: level, since (unix s), reason, by, clean (pages in a row).
    The ladder keys of a spider share the hash tag `{<spiderid>:ladder}` (one script call, one slot)."""
    return f"{{{spiderid}:ladder}}:{domain}"


def ladder_detections(spiderid: str, domain: str) -> str:
    """ZSET `<unix s>:<process>:<reason>` -> unix s: the domain's block detections within its ladder window."""
    return f"{{{spiderid}:ladder}}:{domain}:detections"


def ladder_history(spiderid: str, domain: str) -> str:
    """LIST of the domain's ladder steps (JSON: at, from, to, reason, by), newest first, LADDER_HISTORY long."""
    return f"{{{spiderid}:ladder}}:{domain}:history"


def ladder_domains(spiderid: str) -> str:
    """ZSET domain -> level: every domain of the spider that ever left level 0 (REST, dashboard, metrics)."""
    return f"{{{spiderid}:ladder}}:domains"


# --- Apps sharing the cluster (utils/apps) -------------------------------------------------------
APPS_QUEUED = "shoal:apps:queued"  # HASH appid -> its requests waiting in the frontier (the max_queued quota)
APPS_FIGURES = "shoal:apps:figures"  # HASH appid -> JSON figures (pages/s, queued, share, ...) of the last refresh
API_KEYS = "shoal:apikeys"  # HASH key id -> JSON {app, scopes, salt, hash, created}: REST API keys, hashed
APPS_QUOTAS = "shoal:apps:quotas"  # HASH appid (or `\tdefault`) -> JSON quota: the ZooKeeper node's copy the edge reads


# --- Near-duplicate index (utils/frontier/near_duplicates.py) -------------------------------------
def near_duplicate_band(appid: str, band: int) -> str:
    """HASH 2-byte band value -> the 8-byte SimHashes of the app's pages with that band, packed: one
    of 5 band hashes. An app's index keys share the hash tag `{nd:<appid>}` (one script call, one slot)."""
    return f"shoal:{{nd:{appid}}}:band:{band}"


def near_duplicate_first(appid: str) -> str:
    """HASH 8-byte SimHash -> the URL of the first page seen with it: what `duplicate_of` names."""
    return f"shoal:{{nd:{appid}}}:first"


def near_duplicate_hosts(appid: str, crawlid: str) -> str:
    """HASH host -> near-duplicate pages the crawl got from it: the spider-trap guard's budget."""
    return f"shoal:{{nd:{appid}}}:hosts:{crawlid}"
