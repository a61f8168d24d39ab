"""The dashboard: one static page (no build step) fed by `GET /dashboard/data` and the event streams."""

from __future__ import annotations

import asyncio
from importlib import resources

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, JSONResponse

from rest import overview
from rest.deps import GatewayDep, require_key
from rest.envelope import success

router = APIRouter(tags=["dashboard"])


@router.get("/dashboard", response_class=HTMLResponse, summary="The dashboard page")
def dashboard() -> HTMLResponse:
    page = resources.files("rest.static").joinpath("dashboard.html").read_text()
    return HTMLResponse(page)


@router.get("/dashboard/data", summary="Everything the dashboard shows, as JSON", dependencies=[Depends(require_key)])
async def dashboard_data(gw: GatewayDep) -> JSONResponse:
    return success(await asyncio.to_thread(overview.build, gw))
