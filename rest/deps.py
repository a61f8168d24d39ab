"""Request dependencies: the gateway of the app, and the API key (when REST_API_KEY is set)."""

from __future__ import annotations

import hmac
from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, Path, Query, Request
from fastapi.security import APIKeyCookie, APIKeyHeader

from rest.envelope import NEED_KEY, ApiError
from rest.gateway import Gateway

API_KEY_HEADER = "X-API-Key"
API_KEY_COOKIE = "shoal_api_key"  # set by POST /dashboard/key (HttpOnly, SameSite=Strict): EventSource sends no headers
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="set when REST_API_KEY is")
_key_cookie = APIKeyCookie(name=API_KEY_COOKIE, auto_error=False, description="the dashboard's way")


def gateway(request: Request) -> Gateway:
    found: Gateway = request.app.state.gateway
    return found


GatewayDep = Annotated[Gateway, Depends(gateway)]
# Path and query parameters with the limits of the request schemas (utils/schemas).
AppId = Annotated[str, Path(min_length=3, max_length=40, description="the crawl's appid")]
CrawlId = Annotated[str, Path(min_length=1, max_length=40, description="the crawl's crawlid")]
SpiderId = Annotated[
    str | None, Query(min_length=1, max_length=100, description="spider of the crawl; found when left out")
]


def require_key(
    request: Request, header: Annotated[str | None, Depends(_key_header)],
    cookie: Annotated[str | None, Depends(_key_cookie)], gw: GatewayDep,
) -> None:
    """401 unless REST_API_KEY is empty or the request's X-API-Key header (or the dashboard's cookie)
    equals it. Every route needs it but the health route `/` and the dashboard's static page.

    The cookie opens a state-changing request (POST, DELETE, ...) only when its Origin is this
    gateway's own: a page of another origin on the same site cannot stop a crawl with the dashboard
    user's cookie (cross-site request forgery, issue 30)."""
    expected = gw.settings.get_str("REST_API_KEY")
    if not expected:
        return
    if header is None and cookie and (request.method in SAFE_METHODS or same_origin(request)):
        header = unquote(cookie)
    if not (header and key_matches(header, expected)):
        raise ApiError(401, NEED_KEY, f"send it in the {API_KEY_HEADER} header")


def key_matches(key: str, expected: str) -> bool:
    return hmac.compare_digest(key.encode("utf-8", "replace"), expected.encode())


def same_origin(request: Request) -> bool:
    """Whether the request's Origin header names this gateway (scheme and host as the request reached it)."""
    origin, host = request.headers.get("origin"), request.headers.get("host")
    return bool(origin and host) and origin == f"{request.url.scheme}://{host}"
