"""Revisit state (issue 31), written in the page's own transaction: the schedule, the changes, the log.

Each fetch of a page whose crawl revisits it is staged once; the statements below then, in order,
record a changed hash in `changes`, log the outcome and lateness of a fetch a revisit process fed,
move a not-modified page's `fetched_at` on, and upsert the page's row of `revisits` with the
adaptive rule of utils/frontier/revisit_policy.py. Every statement takes only fetches newer than
the row's `last_fetch`, so a replayed batch (a sink killed before its commit) changes nothing twice.
"""

from __future__ import annotations

from psycopg import sql

from sink.schema import Tables

STAGE = "sink_stage_revisits"
STAGE_COLUMNS = ("appid text, url text, crawlid text, spiderid text, request jsonb, policy jsonb, status_code integer, "
                 "content_hash bytea, etag text, last_modified text, fetched_at timestamptz")  # fmt: skip
REVISIT_COLUMNS = ("appid", "url", "crawlid", "spiderid", "request", "policy", "status_code", "content_hash", "etag",
                   "last_modified", "fetched_at")  # fmt: skip
ITEM_CHANGES_STAGE = "sink_stage_items"

# The newest fetch of each page in the batch.
_LATEST = f"(SELECT DISTINCT ON (appid, url) * FROM {STAGE} ORDER BY appid, url, fetched_at DESC)"


# A fetch from more than half a lease before the row's claim answers an earlier claim (a sink that was
# down past the lease replays it after the row was fed again): it is recorded, but the claim still
# waits for its own page, else the row comes due at once and is fed twice. Half a lease, not the
# claim's instant, because the fetch is stamped by the crawler's clock and the claim by PostgreSQL's.
_EARLIER_CLAIM = "(t.fed_at IS NOT NULL AND EXCLUDED.last_fetch < t.fed_at - (t.next_due - t.fed_at) / 2)"


def _outcome(new: str, old: str) -> str:
    """The SQL of utils/frontier/revisit_policy.outcome_of: `new` holds status_code and content_hash."""
    return (f"CASE WHEN {new}.status_code = 304 THEN 'not_modified' "
            f"WHEN {new}.status_code IN (404, 410) THEN 'gone' "
            f"WHEN {new}.status_code IS NULL OR {new}.status_code >= 400 THEN 'error' "
            f"WHEN {new}.content_hash IS DISTINCT FROM {old}.content_hash THEN 'changed' "
            "ELSE 'unchanged' END")  # fmt: skip


def _number(policy: str, name: str) -> str:
    return f"({policy}->>'{name}')::float8"


def record_changes(tables: Tables) -> sql.Composed:
    return sql.SQL(f"""
INSERT INTO {{changes}} (appid, kind, key, crawlid, changed_at, old_hash, new_hash)
SELECT s.appid, 'page', s.url, s.crawlid, s.fetched_at, r.content_hash, s.content_hash
FROM {_LATEST} s JOIN {{revisits}} r ON r.appid = s.appid AND r.url = s.url
WHERE s.fetched_at > r.last_fetch AND s.status_code < 400 AND s.status_code <> 304 AND s.content_hash IS NOT NULL
  AND r.content_hash IS NOT NULL AND s.content_hash <> r.content_hash
""").format(changes=tables.qualified("changes"), revisits=tables.qualified("revisits"))


def record_item_changes(tables: Tables) -> sql.Composed:
    """Items by item key: a newer version whose hash (or the user's fingerprint) differs is a change."""
    return sql.SQL(f"""
INSERT INTO {{changes}} (appid, kind, key, crawlid, changed_at, old_hash, new_hash)
SELECT s.appid, 'item', s.item_key, s.crawlid, s.seen_at, i.content_hash, s.content_hash
FROM (SELECT DISTINCT ON (appid, item_key) * FROM {ITEM_CHANGES_STAGE} ORDER BY appid, item_key, seen_at DESC) s
JOIN {{items}} i ON i.appid = s.appid AND i.item_key = s.item_key
WHERE s.seen_at > i.last_seen AND s.content_hash <> i.content_hash
""").format(changes=tables.qualified("changes"), items=sql.Identifier(tables.schema, tables.items))


def log_revisits(tables: Tables) -> sql.Composed:
    """One line per fetch a revisit process fed: its outcome and how late after its due time it came."""
    return sql.SQL(f"""
INSERT INTO {{log}} (appid, crawlid, url, fetched_at, outcome, lateness_s)
SELECT s.appid, s.crawlid, s.url, s.fetched_at, {_outcome("s", "r")},
       greatest(extract(epoch FROM s.fetched_at - r.fed_due), 0)
FROM {_LATEST} s JOIN {{revisits}} r ON r.appid = s.appid AND r.url = s.url
WHERE s.fetched_at > r.last_fetch AND r.fed_due IS NOT NULL
""").format(log=tables.qualified("revisit_log"), revisits=tables.qualified("revisits"))


def touch_not_modified(tables: Tables) -> sql.Composed:
    """A 304 writes no page version; the stored one was seen again (its `fetched_at` moves on)."""
    return sql.SQL(f"""
UPDATE {{pages}} p SET fetched_at = s.fetched_at FROM {_LATEST} s
WHERE s.status_code = 304 AND p.appid = s.appid AND p.url = s.url AND s.fetched_at > p.fetched_at
""").format(pages=sql.Identifier(tables.schema, tables.pages))


def upsert_revisits(tables: Tables) -> sql.Composed:
    p = "EXCLUDED.policy"
    clamp_min, clamp_max = _number(p, "min"), _number(p, "max")
    grown = f"least(greatest(t.interval_s * {_number(p, 'inc')}, {clamp_min}), {clamp_max})"
    shrunk = f"least(greatest(t.interval_s * {_number(p, 'dec')}, {clamp_min}), {clamp_max})"
    kept = f"least(greatest(t.interval_s, {clamp_min}), {clamp_max})"
    outcome = _outcome("e", "t").replace("e.status_code", "EXCLUDED.last_status").replace(
        "e.content_hash", "EXCLUDED.content_hash")
    interval = (f"CASE {outcome} WHEN 'not_modified' THEN {grown} WHEN 'unchanged' THEN {grown} "
                f"WHEN 'changed' THEN {shrunk} ELSE {kept} END")  # fmt: skip
    first_due = _due("s.status_code", "s.fetched_at", "s.policy", "(s.policy->>'interval')::float8")
    next_due = _due("EXCLUDED.last_status", "EXCLUDED.last_fetch", p, interval)
    return sql.SQL(f"""
INSERT INTO {{revisits}} AS t (appid, url, crawlid, spiderid, request, policy, etag, last_modified, content_hash,
                               last_fetch, last_seen, last_status, interval_s, next_due)
SELECT s.appid, s.url, s.crawlid, s.spiderid, s.request, s.policy, s.etag, s.last_modified, s.content_hash,
       s.fetched_at, s.fetched_at, s.status_code, (s.policy->>'interval')::float8, {first_due}
FROM {_LATEST} s
ON CONFLICT (appid, url) DO UPDATE SET crawlid = EXCLUDED.crawlid, spiderid = EXCLUDED.spiderid,
    request = EXCLUDED.request, policy = EXCLUDED.policy,
    etag = coalesce(EXCLUDED.etag, CASE WHEN EXCLUDED.last_status = 304 THEN t.etag END),
    last_modified = coalesce(EXCLUDED.last_modified, CASE WHEN EXCLUDED.last_status = 304 THEN t.last_modified END),
    content_hash = coalesce(EXCLUDED.content_hash, t.content_hash),
    last_fetch = EXCLUDED.last_fetch, last_seen = EXCLUDED.last_seen, last_status = EXCLUDED.last_status,
    interval_s = {interval}, next_due = CASE WHEN {_EARLIER_CLAIM} THEN t.next_due ELSE {next_due} END,
    unchanged_count = CASE {outcome} WHEN 'changed' THEN 0 WHEN 'not_modified' THEN t.unchanged_count + 1
                      WHEN 'unchanged' THEN t.unchanged_count + 1 ELSE t.unchanged_count END,
    fed_at = CASE WHEN {_EARLIER_CLAIM} THEN t.fed_at END, fed_due = CASE WHEN {_EARLIER_CLAIM} THEN t.fed_due END
WHERE EXCLUDED.last_fetch > t.last_fetch
""").format(revisits=tables.qualified("revisits"))


def _due(status: str, fetched: str, policy: str, interval: str) -> str:
    """Gone: after gone_interval (0 = never, NULL); an error: after error_interval; else after the interval."""
    return (f"CASE WHEN {status} IN (404, 410) THEN CASE WHEN {_number(policy, 'gone_interval')} > 0 "
            f"THEN {fetched} + make_interval(secs => {_number(policy, 'gone_interval')}) END "
            f"WHEN {status} IS NULL OR {status} >= 400 "
            f"THEN {fetched} + make_interval(secs => {_number(policy, 'error_interval')}) "
            f"ELSE {fetched} + make_interval(secs => {interval}) END")  # fmt: skip


def statements(tables: Tables) -> list[sql.Composed]:
    """In this order: changes and the log read the rows before the upsert moves them on."""
    return [record_changes(tables), log_revisits(tables), touch_not_modified(tables), upsert_revisits(tables)]
