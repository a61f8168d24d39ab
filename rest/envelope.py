"""Scrapy Cluster's response envelope and its messages, and the error that carries them.

Every answer but `/` is `{"status": "SUCCESS"|"FAILURE", "data": ..., "error": null|{"message",
"cause"?}}`, with the status codes and message texts of Scrapy Cluster 1.3's rest service.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
UNKNOWN_ERROR = "An error occurred while processing your request."
MUST_JSON = "The payload must be valid JSON."
DOES_NOT_EXIST = "The desired endpoint does not exist"
BAD_SCHEMA = "JSON did not validate against schema."
NO_KAFKA = "Unable to connect to Kafka"
NO_REDIS = "Unable to connect to Redis"
NO_POLL = "Could not find matching poll_id"
BAD_REDIS_JSON = "Unparseable JSON Received from redis"
NO_CRAWL = "Could not find the crawl"
NEED_KEY = "A valid API key is required"
FORBIDDEN = "This API key may not do that"
OVER_QUOTA = "The app is over its quota"
NEED_JSON = "The request body must be sent as application/json"


class ApiError(Exception):
    """Answered as a FAILURE envelope with `status_code`."""

    def __init__(self, status_code: int, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.cause = cause


def body(data: Any = None, message: str | None = None, cause: str | None = None) -> dict[str, Any]:
    """The envelope: SUCCESS with `data`, or FAILURE with an error message (and cause)."""
    if message is None:
        return {"status": SUCCESS, "data": data, "error": None}
    error: dict[str, Any] = {"message": message}
    if cause is not None:
        error["cause"] = cause
    return {"status": FAILURE, "data": data, "error": error}


def success(data: Any = None) -> JSONResponse:
    return JSONResponse(body(data))


def failure(status_code: int, message: str, cause: str | None = None) -> JSONResponse:
    return JSONResponse(body(None, message, cause), status_code=status_code)
