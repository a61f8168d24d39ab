"""A crawl's revisits (issue 31): figures, pause, resume and drop, read from the sink's PostgreSQL tables.

`GET /revisits` (every crawl with revisit state), `GET /crawls/{appid}/{crawlid}/revisits`,
`POST .../revisits/pause`, `POST .../revisits/resume`, `DELETE .../revisits`. One short connection
per call in a worker thread (SINK_POSTGRES_*); PostgreSQL out of reach: 503, no tables yet: 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from rest.deps import AppId, CrawlId, GatewayDep, require_key
from rest.envelope import ApiError, success
from rest.openapi import ENVELOPE_RESPONSES
from utils.config.postgres import postgres_conninfo
from utils.config.settings import Settings
from utils.freshness import state

router = APIRouter(tags=["revisits"])
NO_POSTGRES = "Unable to connect to PostgreSQL"
NO_REVISITS = "No revisit state: no sink has written to PostgreSQL yet"
T = TypeVar("T")


def _with_db(settings: Settings, work: Callable[[state.Connection, str], T]) -> T:
    try:
        with psycopg.connect(postgres_conninfo(settings), autocommit=True) as connection:
            return work(connection, settings.get_str("SINK_DB_SCHEMA"))
    except psycopg.errors.UndefinedTable:
        raise ApiError(404, NO_REVISITS) from None
    except psycopg.OperationalError as exc:
        raise ApiError(503, NO_POSTGRES, str(exc).strip()[:200]) from None


async def _run(gw: Any, work: Callable[[state.Connection, str], T]) -> T:
    return await asyncio.to_thread(_with_db, gw.settings, work)


@router.get("/revisits", summary="Every crawl's revisits: due now, lateness, 304 share, changes/h",
            responses=ENVELOPE_RESPONSES)  # fmt: skip
async def all_revisits(gw: GatewayDep) -> JSONResponse:
    def read(connection: state.Connection, schema: str) -> list[dict[str, Any]]:
        return [state.summary(connection, schema, a, c) for a, c in state.crawls(connection, schema)]

    return success(await _run(gw, read))


@router.get("/crawls/{appid}/{crawlid}/revisits", summary="A crawl's revisits", responses=ENVELOPE_RESPONSES)
async def crawl_revisits(gw: GatewayDep, appid: AppId, crawlid: CrawlId) -> JSONResponse:
    return success(await _run(gw, lambda c, s: state.summary(c, s, appid, crawlid)))


@router.post("/crawls/{appid}/{crawlid}/revisits/pause", summary="Hold a crawl's revisits (none is lost)",
             responses=ENVELOPE_RESPONSES, dependencies=[Depends(require_key)])  # fmt: skip
async def pause_revisits(gw: GatewayDep, appid: AppId, crawlid: CrawlId) -> JSONResponse:
    def pause(connection: state.Connection, schema: str) -> dict[str, Any]:
        state.pause(connection, schema, appid, crawlid)
        return state.summary(connection, schema, appid, crawlid)

    return success(await _run(gw, pause))


@router.post("/crawls/{appid}/{crawlid}/revisits/resume", summary="Let a crawl's revisits run again",
             responses=ENVELOPE_RESPONSES, dependencies=[Depends(require_key)])  # fmt: skip
async def resume_revisits(gw: GatewayDep, appid: AppId, crawlid: CrawlId) -> JSONResponse:
    def resume(connection: state.Connection, schema: str) -> dict[str, Any]:
        state.resume(connection, schema, appid, crawlid)
        return state.summary(connection, schema, appid, crawlid)

    return success(await _run(gw, resume))


@router.delete("/crawls/{appid}/{crawlid}/revisits", summary="Drop a crawl's revisit state (its pages stay)",
               responses=ENVELOPE_RESPONSES, dependencies=[Depends(require_key)])  # fmt: skip
async def drop_revisits(gw: GatewayDep, appid: AppId, crawlid: CrawlId) -> JSONResponse:
    return success({"dropped": await _run(gw, lambda c, s: state.drop(c, s, appid, crawlid))})
