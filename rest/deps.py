"""Request dependencies: the gateway of the app, and who a request is (its API key) and what it may do.

Keys are off while REST_API_KEY is empty and no app key exists (every route open, as before keys
per app). Then the shared REST_API_KEY is the admin key and each app's key (utils/apps/api_keys.py)
has its scopes: a route needs the scope ROUTE_SCOPES gives it (admin when unlisted), and an app's
key reaches only its own app's crawls (a path's `{appid}`; `/feed` and the lists check theirs).
"""

from __future__ import annotations

import hmac
from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, Path, Query, Request
from fastapi.security import APIKeyCookie, APIKeyHeader

from rest.envelope import FORBIDDEN, NEED_KEY, ApiError
from rest.gateway import Gateway
from utils.apps.api_keys import ADMIN, Principal

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


ANY = "any"  # any valid key (the route checks more itself, e.g. /feed by the kind of request)
ROUTE_SCOPES = {
    ("POST", "/feed"): ANY, ("POST", "/poll"): ANY, ("POST", "/dashboard/key"): ANY,
    ("GET", "/openapi.json"): ANY, ("GET", "/docs"): ANY, ("GET", "/redoc"): ANY,
    ("GET", "/crawls"): "info", ("GET", "/crawls/{appid}/{crawlid}"): "info",
    ("GET", "/crawls/{appid}/{crawlid}/events"): "info", ("POST", "/crawls/{appid}/{crawlid}/stop"): "stop",
    ("GET", "/dead-letters/{appid}/{crawlid}"): "info", ("POST", "/dead-letters/{appid}/{crawlid}/replay"): "stop",
    ("DELETE", "/dead-letters/{appid}/{crawlid}"): "stop", ("GET", "/crawls/{appid}/{crawlid}/revisits"): "info",
    ("POST", "/crawls/{appid}/{crawlid}/revisits/pause"): "stop",
    ("POST", "/crawls/{appid}/{crawlid}/revisits/resume"): "stop",
    ("DELETE", "/crawls/{appid}/{crawlid}/revisits"): "stop",
    ("GET", "/apps"): "info", ("GET", "/apps/{appid}"): "info",
}  # fmt: skip


def require_key(
    request: Request,
    header: Annotated[str | None, Depends(_key_header)],
    cookie: Annotated[str | None, Depends(_key_cookie)],
    gw: GatewayDep,
) -> Principal:
    """Who the request is: 401 without a valid key (when keys are on), 403 when its key lacks the
    route's scope or names another app. Every route needs it but `/` and the dashboard's static page.

    The cookie opens a state-changing request (POST, DELETE, ...) only when its Origin is this
    gateway's own: a page of another origin on the same site cannot stop a crawl with the dashboard
    user's cookie (cross-site request forgery, issue 30)."""
    if header is None and cookie and (request.method in SAFE_METHODS or same_origin(request)):
        header = unquote(cookie)
    principal = authenticate(gw, header)
    route = getattr(request.scope.get("route"), "path", "")
    scope = ROUTE_SCOPES.get((request.method, route), "admin")
    if scope != ANY and not principal.allows(scope):
        raise ApiError(403, FORBIDDEN, f"this key's scopes ({', '.join(sorted(principal.scopes))}) lack {scope!r}")
    appid = request.path_params.get("appid")
    if appid is not None and not principal.sees(appid):
        raise ApiError(403, FORBIDDEN, f"this key is app {principal.app!r}'s, not {appid!r}'s")
    request.state.principal = principal
    return principal


def authenticate(gw: Gateway, presented: str | None) -> Principal:
    """The admin for the shared key (or when keys are off), an app for its key; else 401."""
    expected = gw.settings.get_str("REST_API_KEY")
    if presented and expected and key_matches(presented, expected):
        return ADMIN
    found = gw.keys.principal(presented) if presented else None
    if found is not None:
        return found
    if not expected and not gw.keys.keys_exist():
        return ADMIN
    raise ApiError(401, NEED_KEY, f"send it in the {API_KEY_HEADER} header")


def keys_on(gw: Gateway) -> bool:
    return bool(gw.settings.get_str("REST_API_KEY")) or gw.keys.keys_exist()


def principal_of(request: Request) -> Principal:
    """The principal `require_key` found for this request (the admin on a route it does not guard)."""
    found: Principal = getattr(request.state, "principal", ADMIN)
    return found


def key_matches(key: str, expected: str) -> bool:
    return hmac.compare_digest(key.encode("utf-8", "replace"), expected.encode())


def same_origin(request: Request) -> bool:
    """Whether the request's Origin header names this gateway (scheme and host as the request reached it)."""
    origin, host = request.headers.get("origin"), request.headers.get("host")
    return bool(origin and host) and origin == f"{request.url.scheme}://{host}"
