"""The dashboard: one static page (no build step) fed by `GET /dashboard/data` and the event streams."""

from __future__ import annotations

import asyncio
from importlib import resources
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse

from rest import overview
from rest.deps import API_KEY_COOKIE, API_KEY_HEADER, GatewayDep, keys_on, require_key
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


@router.post("/dashboard/key", summary="Keep the API key (sent in X-API-Key) in the dashboard's cookie",
             dependencies=[Depends(require_key)])  # fmt: skip
def dashboard_key(request: Request, gw: GatewayDep) -> JSONResponse:
    """The cookie is HttpOnly (no script reads it), SameSite=Strict, and Secure when served over https.

    Only the X-API-Key header sets it (a cross-site form cannot send that header), so this route
    cannot be used to plant a key either. EventSource cannot send headers: the streams need the cookie.
    """
    answer = success(None)
    key = request.headers.get(API_KEY_HEADER)
    if key and keys_on(gw):
        answer.set_cookie(API_KEY_COOKIE, quote(key, safe=""), path="/", httponly=True, samesite="strict",
                          secure=request.url.scheme == "https")  # fmt: skip
    return answer
