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

# Only the dashboard's own script, style and data: an injected <script> or inline handler never runs.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@router.get("/dashboard", response_class=HTMLResponse, summary="The dashboard page")
def dashboard() -> HTMLResponse:
    page = resources.files("rest.static").joinpath("dashboard.html").read_text()
    return HTMLResponse(page, headers=SECURITY_HEADERS)


@router.get("/dashboard/data", summary="Everything the dashboard shows, as JSON", dependencies=[Depends(require_key)])
async def dashboard_data(gw: GatewayDep) -> JSONResponse:
    return success(await asyncio.to_thread(overview.build, gw))
