"""Crawl progress: `GET /crawls`, `GET /crawls/{appid}/{crawlid}`, its event stream, and stop."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from rest.deps import AppId, CrawlId, GatewayDep, SpiderId, principal_of, require_key
from rest.envelope import NO_CRAWL, ApiError, success
from rest.gateway import Gateway
from rest.openapi import ENVELOPE_RESPONSES
from rest.sampler import LIVE_LIMIT
from rest.submit import submit
from rest.validation import check
from utils.frontier import progress
from utils.frontier.progress import CrawlRef, RateTracker
from utils.frontier.shards import Shards

router = APIRouter(tags=["crawls"])
KEEPALIVE = 15.0  # seconds: a progress event is sent at least this often, changed or not
DRAIN_ROUNDS = 3  # stream intervals a finished crawl's stream keeps reading late pages


def _snapshot(gw: Gateway, found: progress.Progress) -> dict[str, Any]:
    return progress.snapshot(found, gw.sampler.tracker(found.ref))


async def existing_crawl(gw: GatewayDep, appid: AppId, crawlid: CrawlId, spiderid: SpiderId = None) -> CrawlRef:
    """The crawl's ref; 404 when no progress is kept for it (never queued, or expired)."""
    ref = await asyncio.to_thread(progress.find, gw.redis, appid, crawlid, spiderid)
    if ref is None:
        raise ApiError(404, NO_CRAWL, f"no progress for appid {appid!r}, crawlid {crawlid!r}")
    return ref


CrawlDep = Annotated[CrawlRef, Depends(existing_crawl)]


@router.get("/crawls", summary="Live crawls, most recent first", responses=ENVELOPE_RESPONSES)
async def list_crawls(
    request: Request,
    gw: GatewayDep,
    running: bool = Query(False, description="only crawls not finished yet"),
    limit: int = Query(50, ge=1, le=LIVE_LIMIT),
) -> JSONResponse:
    """An app's key lists its own app's crawls only."""
    principal = principal_of(request)

    def read() -> list[dict[str, Any]]:
        since = time.time() - gw.settings.get_int("CRAWL_STATE_TIMEOUT")
        refs = progress.live_crawls(gw.redis, since, limit if principal.admin else LIVE_LIMIT)
        refs = [ref for ref in refs if principal.sees(ref.appid)][:limit]
        found = [p for p in progress.read_many(gw.redis, refs, Shards.from_settings(gw.settings)) if p is not None]
        return [_snapshot(gw, p) for p in found if not (running and p.finished)]

    return success(await asyncio.to_thread(read))


@router.get("/crawls/{appid}/{crawlid}", summary="A crawl's progress, pages/s and ETA", responses=ENVELOPE_RESPONSES)
async def crawl_progress(gw: GatewayDep, ref: CrawlDep) -> JSONResponse:
    found = await asyncio.to_thread(progress.read, gw.redis, ref, Shards.from_settings(gw.settings))
    if found is None:
        raise ApiError(404, NO_CRAWL)
    return success(_snapshot(gw, found))


@router.post(
    "/crawls/{appid}/{crawlid}/stop",
    summary="Stop a crawl (a `stop` action; the answer, or a poll_id)",
    responses=ENVELOPE_RESPONSES,
    dependencies=[Depends(require_key)],
)
async def stop_crawl(gw: GatewayDep, appid: AppId, crawlid: CrawlId, spiderid: SpiderId = None) -> JSONResponse:
    if spiderid is None:
        ref = await asyncio.to_thread(progress.find, gw.redis, appid, crawlid, None)
        spiderid = ref.spiderid if ref else "link"
    message = {"action": "stop", "appid": appid, "crawlid": crawlid, "spiderid": spiderid, "uuid": uuid.uuid4().hex}
    check("action", message)
    return await submit(gw, message)


@router.get(
    "/crawls/{appid}/{crawlid}/events",
    response_class=EventSourceResponse,
    summary="Server-sent events: `progress` (changes, at least every 15 s), `page` (each page), `finished`",
)
async def crawl_events(gw: GatewayDep, ref: CrawlDep) -> AsyncIterable[ServerSentEvent]:
    interval = gw.settings.get_float("REST_STREAM_INTERVAL")
    sub = gw.pages.subscribe(ref.appid, ref.crawlid)
    try:
        try:
            await asyncio.wait_for(sub.ready.wait(), gw.settings.get_float("WAIT_FOR_RESPONSE_TIME"))
        except TimeoutError:
            pass  # Kafka is slow: progress still flows, pages from when the consumer is positioned
        tracker = RateTracker(gw.settings.get_float("REST_RATE_WINDOW"))
        last: dict[str, Any] | None = None
        sent_at = 0.0
        while True:
            found = await asyncio.to_thread(progress.read, gw.redis, ref, Shards.from_settings(gw.settings))
            if found is None:
                yield ServerSentEvent(event="gone", data={"appid": ref.appid, "crawlid": ref.crawlid})
                return
            now = time.time()
            tracker.add(now, found)
            snap = progress.snapshot(found, tracker, now)
            if last is None or found.counters != last or now - sent_at >= KEEPALIVE:
                yield ServerSentEvent(event="progress", data=snap)
                last, sent_at = found.counters, now
            rounds = DRAIN_ROUNDS if found.finished else 1
            for _ in range(rounds):
                async for page in _pages_for(sub.queue, interval):
                    yield ServerSentEvent(event="page", data=page)
            if found.finished:
                yield ServerSentEvent(event="finished", data=snap)
                return
    finally:
        gw.pages.unsubscribe(sub)


async def _pages_for(queue: asyncio.Queue[dict[str, Any]], seconds: float) -> AsyncIterable[dict[str, Any]]:
    """The pages that arrive within `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (remaining := deadline - loop.time()) > 0:
        try:
            yield await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            return
