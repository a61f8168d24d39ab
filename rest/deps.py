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
API_KEY_COOKIE = "shoal_api_key"  # set by the dashboard (SameSite=Strict): EventSource cannot send headers

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
    header: Annotated[str | None, Depends(_key_header)], cookie: Annotated[str | None, Depends(_key_cookie)],
    gw: GatewayDep,
) -> None:
    """401 unless REST_API_KEY is empty or the request's X-API-Key header (or the dashboard's cookie)
    equals it. Every route needs it but the health route `/` and the dashboard's static page."""
    key = header or (unquote(cookie) if cookie else None)
    expected = gw.settings.get_str("REST_API_KEY")
    if expected and not (key and hmac.compare_digest(key.encode(), expected.encode())):
        raise ApiError(401, NEED_KEY, f"send it in the {API_KEY_HEADER} header")
