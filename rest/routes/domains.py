"""A domain's block escalation ladder (issue 33): `GET /domains/{spider}` and `GET /domains/{spider}/{domain}`.

Read straight from the frontier's Redis state (utils/frontier/ladder.py); setting a level is an
operator's act, done with `shoal domain set` or the ZooKeeper config, not over HTTP.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from rest.deps import GatewayDep
from rest.envelope import success
from rest.openapi import ENVELOPE_RESPONSES
from utils.frontier.block_config import LEVEL_NAMES
from utils.frontier.domains import host_domain
from utils.frontier.ladder import Ladder

router = APIRouter()
Spider = Annotated[str, PathParam(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
Domain = Annotated[str, PathParam(min_length=1, max_length=253)]


@router.get("/domains/{spider}", tags=["domains"], summary="Every domain of a spider that left level 0 of its ladder",
            responses=ENVELOPE_RESPONSES)  # fmt: skip
async def domains(gw: GatewayDep, spider: Spider) -> JSONResponse:
    levels = await asyncio.to_thread(Ladder(gw.redis, 0, 0).domains, spider)
    listed = [{"domain": d, "level": level, "state": LEVEL_NAMES[level]} for d, level in sorted(levels.items())]
    return success({"spiderid": spider, "domains": listed})


@router.get("/domains/{spider}/{domain}", tags=["domains"],
            summary="A domain's ladder: level, since, reason, detections and every step (history)",
            responses=ENVELOPE_RESPONSES)  # fmt: skip
async def domain(gw: GatewayDep, spider: Spider, domain: Domain) -> JSONResponse:
    state = await asyncio.to_thread(Ladder(gw.redis, 0, 0).state, spider, host_domain(domain))
    return success(state)
