"""Scrapy Cluster's endpoints: `GET|POST /` (health), `POST /feed`, `POST /poll`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis
import ujson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from rest.deps import GatewayDep, principal_of, require_key
from rest.envelope import BAD_REDIS_JSON, NO_POLL, NO_REDIS, ApiError, success
from rest.feed_access import check_access, check_quota
from rest.gateway import Gateway
from rest.openapi import ENVELOPE_RESPONSES, feed_body, poll_body
from rest.submit import submit
from rest.validation import match_request, parse_json, poll_id, refuse_url, require_json
from utils.config.address_policy import AddressPolicy
from utils.config.redact import redact_secrets
from utils.frontier import keys

log = logging.getLogger(__name__)
router = APIRouter()


@router.get("/", summary="Health (unwrapped, as Scrapy Cluster's)")
def index(gw: GatewayDep) -> dict[str, Any]:
    """kafka_connected, redis_connected, uptime_sec, my_id and node_health GREEN/YELLOW/RED."""
    log.info("'index' endpoint called")
    return gw.health.index()


@router.post("/", summary="Health, as GET / (Scrapy Cluster accepts both)")
def index_post(gw: GatewayDep) -> dict[str, Any]:
    return index(gw)


@router.post(
    "/feed",
    summary="Send a crawl, action, stats or zookeeper request to the cluster",
    openapi_extra=feed_body(),
    responses=ENVELOPE_RESPONSES,
    dependencies=[Depends(require_key)],
)
async def feed(request: Request, gw: GatewayDep) -> JSONResponse:
    """Validated against the kafka monitor's schemas, then sent to the incoming topic. With a uuid,
    `data` is the answer when it comes within WAIT_FOR_RESPONSE_TIME, else `{"poll_id": uuid}`."""
    require_json(request)
    message = parse_json(await request.body(), gw.settings.get_int("REST_JSON_MAX_DEPTH"))
    log.info("'feed' endpoint called", extra={"content": redact_secrets(message)})
    kind = match_request(message)
    check_access(principal_of(request), kind, message)
    if kind == "crawl":
        refuse_url(message, AddressPolicy.from_settings(gw.settings))
        await check_quota(gw, message)
    return await submit(gw, message)


@router.post("/poll", summary="Fetch an answer that came after /feed returned a poll_id",
             openapi_extra=poll_body(), responses=ENVELOPE_RESPONSES,
             dependencies=[Depends(require_key)])  # fmt: skip
async def poll(request: Request, gw: GatewayDep) -> JSONResponse:
    """The stored answer, once: it is deleted as it is returned (404 until it arrives)."""
    require_json(request)
    message = parse_json(await request.body(), gw.settings.get_int("REST_JSON_MAX_DEPTH"))
    wanted = poll_id(message)
    log.info("'poll' endpoint called", extra={"content": message})
    return success(await asyncio.to_thread(_take_result, gw, wanted))


def _take_result(gw: Gateway, wanted: str) -> Any:
    key = keys.rest_poll(wanted)
    try:
        raw = gw.redis.getdel(key)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        log.error("Lost connection to Redis", extra={"error": str(exc)})
        raise ApiError(500, NO_REDIS) from exc
    if raw is None:
        raise ApiError(404, NO_POLL)
    try:
        return ujson.loads(raw)
    except ValueError as exc:
        log.warning("Unparseable JSON Received from redis", extra={"value": raw[:200]})
        raise ApiError(500, BAD_REDIS_JSON) from exc
