"""Stats and dead letters: `GET /stats/{kind}`, `GET|DELETE /dead-letters/...`, and their replay.

Stats and the dead-letter actions are requests to the redis monitors, answered on the outbound
firehose like any /feed request with a uuid; listing dead letters reads the crawl's list directly.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

import ujson
from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from rest.deps import AppId, CrawlId, GatewayDep, SpiderId, require_key
from rest.envelope import success
from rest.gateway import Gateway
from rest.openapi import ENVELOPE_RESPONSES
from rest.submit import submit
from rest.validation import check
from utils import schemas
from utils.config.redact import redact_secrets
from utils.frontier import keys, progress

router = APIRouter()
DEFAULT_APPID = "shoal-rest"  # appid of the requests the gateway makes for its callers
DEFAULT_SPIDER = "link"
# the values the stats schema allows (documented in the OpenAPI; the schema itself validates)
STATS_KINDS = schemas.schema("stats")["properties"]["stats"]["enum"] if "stats" in schemas.available() else []


@router.get(
    "/stats/{kind}",
    tags=["cluster"],
    summary="A stats request (kafka-monitor, redis-monitor, crawler, spider, machine, queue, rest, all)",
    responses=ENVELOPE_RESPONSES,
)
async def stats(
    gw: GatewayDep,
    kind: Annotated[str, PathParam(json_schema_extra={"enum": STATS_KINDS})],
    appid: Annotated[str, Query(min_length=3, max_length=40)] = DEFAULT_APPID,
) -> JSONResponse:
    message = {"uuid": uuid.uuid4().hex, "appid": appid, "stats": kind}
    check("stats", message)
    return await submit(gw, message)


async def _spider(gw: Gateway, appid: str, crawlid: str, spiderid: str | None) -> str:
    if spiderid:
        return spiderid
    ref = await asyncio.to_thread(progress.find, gw.redis, appid, crawlid, None)
    return ref.spiderid if ref else DEFAULT_SPIDER


@router.get("/dead-letters/{appid}/{crawlid}", tags=["dead letters"],
            summary="A crawl's dead letters, newest first", responses=ENVELOPE_RESPONSES)  # fmt: skip
async def list_dead_letters(
    gw: GatewayDep,
    appid: AppId,
    crawlid: CrawlId,
    spiderid: SpiderId = None,
    start: int = Query(0, ge=0, le=10**12),  # Redis takes 64-bit indexes; no list is longer
    count: int = Query(100, ge=1, le=1000),
) -> JSONResponse:
    sid = await _spider(gw, appid, crawlid, spiderid)
    key = keys.dead_letters(sid, appid, crawlid)

    def read() -> dict[str, Any]:
        pipe = gw.redis.pipeline(transaction=False)
        pipe.llen(key)
        pipe.lrange(key, start, start + count - 1)
        total, raw = pipe.execute()
        letters = [redact_secrets(_decode(item)) for item in raw]  # cookies, tokens: never shown
        return {"appid": appid, "crawlid": crawlid, "spiderid": sid, "total": total, "dead_letters": letters}

    return success(await asyncio.to_thread(read))


async def _action(gw: Gateway, action: str, appid: str, crawlid: str, spiderid: str | None) -> JSONResponse:
    sid = await _spider(gw, appid, crawlid, spiderid)
    message = {"action": action, "appid": appid, "crawlid": crawlid, "spiderid": sid, "uuid": uuid.uuid4().hex}
    check("action", message)
    return await submit(gw, message)


@router.post(
    "/dead-letters/{appid}/{crawlid}/replay",
    tags=["dead letters"],
    summary="Queue a crawl's dead letters again, attempts reset (a replay-dead-letters action)",
    responses=ENVELOPE_RESPONSES,
    dependencies=[Depends(require_key)],
)
async def replay_dead_letters(
    gw: GatewayDep, appid: AppId, crawlid: CrawlId, spiderid: SpiderId = None
) -> JSONResponse:
    return await _action(gw, "replay-dead-letters", appid, crawlid, spiderid)


@router.delete(
    "/dead-letters/{appid}/{crawlid}",
    tags=["dead letters"],
    summary="Delete a crawl's dead letters (a purge-dead-letters action)",
    responses=ENVELOPE_RESPONSES,
    dependencies=[Depends(require_key)],
)
async def purge_dead_letters(gw: GatewayDep, appid: AppId, crawlid: CrawlId, spiderid: SpiderId = None) -> JSONResponse:
    return await _action(gw, "purge-dead-letters", appid, crawlid, spiderid)


def _decode(item: str) -> Any:
    try:
        return ujson.loads(item)
    except ValueError:
        return item
