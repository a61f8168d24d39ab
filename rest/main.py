"""`shoal rest`: the REST gateway on REST_HOST:REST_PORT, until SIGTERM (uvicorn handles it)."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from rest.app import create_app
from utils.config.settings import Settings

log = logging.getLogger(__name__)


class _NoColorMessage(logging.Filter):
    """Uvicorn adds an ANSI-coloured copy of its messages as an extra field; JSON logs drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


def main(settings: Settings, args: argparse.Namespace) -> int:
    config = uvicorn.Config(
        create_app(settings),
        host=settings.get_str("REST_HOST"),
        port=settings.get_int("REST_PORT"),
        log_config=None,  # keep Shoal's JSON logging (installed by the CLI)
        access_log=settings.get_bool("REST_ACCESS_LOG"),
        timeout_graceful_shutdown=5,  # event streams are closed after this, not awaited forever
    )
    logging.getLogger("uvicorn.error").addFilter(_NoColorMessage())
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1
