"""Hand a request to the cluster and wait for its answer: Scrapy Cluster's wait-then-poll_id flow.

A request with a uuid waits up to WAIT_FOR_RESPONSE_TIME seconds for the answer with that uuid on
the outbound firehose; without one in time the caller gets `{"poll_id": uuid}` and the answer,
when it comes, waits in Redis for /poll.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi.responses import JSONResponse

from rest.envelope import NO_KAFKA, ApiError, success
from rest.gateway import Gateway
from rest.outbound import KafkaUnavailable

log = logging.getLogger(__name__)


async def submit(gw: Gateway, message: dict[str, Any]) -> JSONResponse:
    outbound = gw.outbound
    if not outbound.ready:
        raise ApiError(500, NO_KAFKA)
    uuid = message.get("uuid") if isinstance(message.get("uuid"), str) else None
    waiter = outbound.waiters.register(uuid) if uuid else None
    try:
        await outbound.send(message)
    except BaseException as exc:
        if uuid and waiter:
            outbound.waiters.release(uuid, waiter)
        if isinstance(exc, KafkaUnavailable):
            log.error("Lost connection to Kafka", extra={"error": str(exc)})
            raise ApiError(500, NO_KAFKA) from exc
        raise
    if not uuid or waiter is None:
        return success(None)
    answer = await outbound.waiters.wait(uuid, waiter, gw.settings.get_float("WAIT_FOR_RESPONSE_TIME"))
    if answer is None:
        log.warning(
            "Did not get response within timeout from kafka. If the request is still running, use the `/poll` API",
            extra={"uuid": uuid},
        )
        return success({"poll_id": uuid})
    return success(answer)
