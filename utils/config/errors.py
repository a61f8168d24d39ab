"""The small error tree every component shares.

`retriable` tells a loop whether to back off and try the same work again (a service is down) or
to answer, dead-letter and go on (the input is wrong).
"""

from __future__ import annotations

import traceback


class ShoalError(Exception):
    """Base of every Shoal error."""

    retriable = False


class ConfigError(ShoalError):
    """A setting or a settings source is wrong; raised at start-up."""


class InvalidMessage(ShoalError):
    """A message is not JSON, matches no schema, or has a value out of range."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause


class HandlerError(ShoalError):
    """A plugin failed on a valid message for a reason that retrying will not fix."""


class ServiceUnavailable(ShoalError):
    """Redis, Kafka or ZooKeeper did not answer; the work is kept and retried."""

    retriable = True


def last_line(exc: BaseException) -> str:
    """An exception as the last line of its traceback (`KeyError: 'price'`): short enough for a
    dead letter or a start-up error, and still says what and where it was."""
    return traceback.format_exception_only(exc)[-1].strip()
