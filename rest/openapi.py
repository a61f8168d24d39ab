"""The OpenAPI document: the request bodies are the kafka monitor's own JSON Schema files.

/feed and /poll read their bodies themselves (to answer with Scrapy Cluster's messages), so their
schemas are added here: each request kind of utils/schemas becomes a named component, read when
the document is first built, so a schema file added later is documented without code changes.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse

from rest.deps import require_key
from rest.validation import poll_schema, request_kinds
from utils import schemas

ENVELOPE_REF = {"$ref": "#/components/schemas/Envelope"}
ENVELOPE_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {"schema": ENVELOPE_REF}}}
    for code, text in (
        (200, "SUCCESS: `data` holds the answer"),
        (400, "FAILURE: the body is not JSON or matches no schema (`error.cause` says why)"),
        (404, "FAILURE: not found"),
        (500, "FAILURE: Kafka or Redis unavailable"),
    )
}
ENVELOPE: dict[str, Any] = {
    "type": "object",
    "description": "Scrapy Cluster's response envelope",
    "properties": {
        "status": {"type": "string", "enum": ["SUCCESS", "FAILURE"]},
        "data": {},
        "error": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"message": {"type": "string"}, "cause": {"type": "string"}},
                    "required": ["message"],
                },
            ]
        },
    },
    "required": ["status", "data", "error"],
}


def component_name(kind: str) -> str:
    return f"{kind.capitalize()}Request"


def _json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


def feed_body() -> dict[str, Any]:
    """A placeholder filled in by `build` (the schema list is read when the document is built)."""
    return _json_body({}, "one crawl, action, stats or zookeeper request (the kafka monitor's schemas)")


def poll_body() -> dict[str, Any]:
    return _json_body({"$ref": "#/components/schemas/PollRequest"}, "the poll_id that /feed returned")


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    cleaned = copy.deepcopy(schema)
    cleaned.pop("$schema", None)
    return cleaned


def build(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components["Envelope"] = ENVELOPE
    components["PollRequest"] = _clean(poll_schema())
    kinds = request_kinds()
    for kind in kinds:
        components[component_name(kind)] = _clean(schemas.schema(kind))
    feed = document["paths"]["/feed"]["post"]["requestBody"]["content"]["application/json"]
    feed["schema"] = {"anyOf": [{"$ref": f"#/components/schemas/{component_name(k)}"} for k in kinds]}
    return document


def install(app: FastAPI) -> None:
    """Serve `build`'s document at /openapi.json (built once, on first request), and /docs and /redoc;
    all three need the API key when one is set (issue 30: they described every route to anyone)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    keyed = [Depends(require_key)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=keyed)
    def document() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=keyed)
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs")

    @app.get("/redoc", include_in_schema=False, dependencies=keyed)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - ReDoc")
