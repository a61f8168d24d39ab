"""The apps sharing the cluster: `GET /apps` and `GET /apps/{appid}` (figures of the redis monitor's
last refresh, and the quotas in force). An app's key sees its own app only."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from rest.apps_view import apps_view
from rest.deps import AppId, GatewayDep, principal_of
from rest.envelope import success
from rest.openapi import ENVELOPE_RESPONSES

router = APIRouter(tags=["apps"])


@router.get("/apps", summary="Every app's figures: pages/s, queued, in flight, quota use, share, time to first page",
            responses=ENVELOPE_RESPONSES)  # fmt: skip
async def list_apps(request: Request, gw: GatewayDep) -> JSONResponse:
    principal = principal_of(request)
    wanted = None if principal.admin or principal.app is None else [principal.app]
    return success(await asyncio.to_thread(apps_view, gw, wanted))


@router.get("/apps/{appid}", summary="One app's figures and quota", responses=ENVELOPE_RESPONSES)
async def one_app(gw: GatewayDep, appid: AppId) -> JSONResponse:
    view = await asyncio.to_thread(apps_view, gw, [appid])
    return success(view["apps"][0] if view["apps"] else {"appid": appid, "quota": view["default_quota"]})
