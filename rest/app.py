"""The FastAPI application: routes, Scrapy Cluster's error envelope for every failure, CORS, lifespan.

FastAPI on uvicorn (one process, asyncio): a request waiting for its answer is an awaited event,
not a thread, and the OpenAPI document and server-sent events come with the framework.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rest import envelope, openapi
from rest.deps import API_KEY_HEADER, require_key
from rest.envelope import ApiError
from rest.gateway import Gateway
from rest.limits import BodyLimit
from rest.routes import apps, cluster, core, crawls, dashboard, domains
from rest.routes.revisits import router as revisits_router
from utils.config.settings import Settings
from utils.observability.metrics import record_rest_request

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Shoal's REST gateway, compatible with Scrapy Cluster 1.3's rest service (`/`, `/feed`, `/poll`), "
    "plus crawl progress, event streams, stats, dead letters and a dashboard at /dashboard."
)


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gateway = Gateway.from_settings(settings)
        app.state.gateway = gateway
        gateway.start()
        yield
        await asyncio.to_thread(gateway.close)

    app = FastAPI(title="Shoal REST gateway", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)  # served by rest.openapi, keyed  # fmt: skip
    app.include_router(core.router)
    app.include_router(dashboard.router)
    for keyed in (crawls.router, cluster.router, domains.router, apps.router):  # crawl data: keyed if set
        app.include_router(keyed, dependencies=[Depends(require_key)])
    app.include_router(revisits_router, dependencies=[Depends(require_key)])  # issue 31: crawl data too
    app.mount("/dashboard/static", StaticFiles(packages=[("rest", "static")]), name="dashboard-static")
    _add_error_handlers(app)
    origins = settings.get_list("REST_CORS_ORIGINS")
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Content-Type", API_KEY_HEADER],
        )
    app.add_middleware(BodyLimit, max_bytes=settings.get_int("REST_MAX_BODY_BYTES"))
    app.add_middleware(RequestMetrics)
    openapi.install(app)
    return app


class RequestMetrics:
    """Counts and times every HTTP request by its route's template (/crawls/{appid}/{crawlid}), so
    the metric's labels stay bounded whatever paths clients ask for. Pure ASGI: streams pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless a response starts

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            record_rest_request(scope["method"], route_template(scope), status, time.perf_counter() - started)


def route_template(scope: Scope) -> str:
    """The matched route's path template (the router fills scope["route"]); "unmatched" for a 404."""
    route = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    return str(path) if path else "unmatched"


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        level = logging.ERROR if exc.status_code >= 500 else logging.WARNING
        log.log(level, exc.message, extra={"cause": exc.cause, "path": request.url.path, "status": exc.status_code})
        return envelope.failure(exc.status_code, exc.message, exc.cause)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):  # Scrapy Cluster's catch-all route answers both
            log.info("Non-existant route called", extra={"path": request.url.path, "method": request.method})
            return envelope.failure(404, envelope.DOES_NOT_EXIST)
        return envelope.failure(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid_parameters(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        cause = f"{'.'.join(str(part) for part in first.get('loc', ()))}: {first.get('msg', 'invalid')}"
        log.warning("Invalid Schema", extra={"cause": cause, "path": request.url.path})
        return envelope.failure(400, envelope.BAD_SCHEMA, cause)

    @app.exception_handler(redis.ConnectionError)
    @app.exception_handler(redis.TimeoutError)
    async def redis_down(request: Request, exc: Exception) -> JSONResponse:
        log.error("Lost connection to Redis", extra={"error": str(exc), "path": request.url.path})
        return envelope.failure(500, envelope.NO_REDIS)

    @app.exception_handler(Exception)
    async def unknown(request: Request, exc: Exception) -> JSONResponse:
        log.error("Uncaught Exception Thrown", exc_info=exc, extra={"path": request.url.path})
        return envelope.failure(500, envelope.UNKNOWN_ERROR)
