"""A batch's Redis writes: one pipeline, streamed in chunks, its replies read one batch later.

Redis runs the enqueue script while Python validates: each chunk of a batch leaves for Redis as
soon as it is validated, and the batch's replies are read only after the next batch has been
validated and sent behind it (waiting for replies fell from 29 % of the benchmark's time to 9 %
on the shared 2-core machine). Every group of replies is read in order on one connection. Any
error (Redis gone, restarted without its scripts, out of memory) is handled by the caller writing
the whole batch again with `write_all`: every write is idempotent (offset-checked enqueue, one job
per message), so a half-applied pipeline is harmless.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from kafka_monitor.batch import Command
from utils.config.clients import RedisClient
from utils.config.errors import last_line
from utils.frontier import Frontier, NewRequest


class WriteRefused(Exception):
    """A write that failed before Redis saw it: a plugin's command raised, or redis-py could not encode
    a value (DataError, UnicodeEncodeError). About a message, not Redis: the batch is written message by
    message and the one that fails alone is refused (issue 30: it was raised again and again)."""


RETRIABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, redis.ResponseError, WriteRefused)
Sent = tuple[tuple[Any, ...], dict[str, Any]]  # a command's args and options, as redis-py keeps them


@dataclass(eq=False)
class Group:
    """The commands of one batch on the stream, and where its enqueue replies are."""

    sent: list[Sent] = field(default_factory=list)
    enqueues: list[int] = field(default_factory=list)  # indexes of enqueue replies in `sent`
    places: list[list[int]] = field(default_factory=list)  # per enqueue call, its requests' positions
    size: int = 0  # requests sent so far
    error: Exception | None = None
    held: Any = None  # the whole pipeline, when not streaming (Redis Cluster)


class BatchWriter:
    """Streams batches on one dedicated connection; `finish` reads the oldest batch's replies.

    Once a batch failed, the batches behind it are not streamed either (they fail with it), so
    requests reach their queues in the topic's order.
    """

    def __init__(self, client: RedisClient, frontier: Frontier, streaming: bool = True) -> None:
        self.client = client
        self.frontier = frontier
        self.streaming = streaming and isinstance(client, redis.Redis)  # not on Redis Cluster
        self._conn: Any = None
        self._open: deque[Group] = deque()  # sent, replies not read yet, oldest first
        self._loaded: set[str] = set()  # script shas loaded on this connection

    def begin(self) -> Group:
        group = Group()
        self._open.append(group)
        return group

    def send(self, group: Group, requests: Sequence[NewRequest], commands: Iterable[Command]) -> None:
        """Queue a chunk's writes; when streaming they leave for Redis at once. Never raises: a failure
        is kept on the group (and the groups behind it) and raised by `finish`."""
        try:
            self._send(group, requests, commands)
        except RETRIABLE as exc:
            self._break(exc)
        except Exception as exc:  # a plugin's command, an unencodable value: before anything reached Redis
            self._break(WriteRefused(last_line(exc)), group)

    def _send(self, group: Group, requests: Sequence[NewRequest], commands: Iterable[Command]) -> None:
        pipe = group.held if group.held is not None else self.client.pipeline(transaction=False)
        calls = self.frontier.enqueue_in(pipe, requests)
        group.places.extend([group.size + p for p in call] for call in calls)
        group.size += len(requests)
        for command in commands:
            command(pipe)
        if not self.streaming:
            group.held = pipe
            return
        failed = next((g.error for g in self._open if g.error is not None), None)
        if failed is not None:  # never write past a batch that must be written again first
            group.error = group.error or failed
        elif pipe.command_stack:
            self._stream(group, pipe, len(calls))

    def finish(self, group: Group) -> list[str]:
        """The oldest group's enqueue statuses, one per request in order; raises what went wrong (RETRIABLE)."""
        if not self._open or self._open[0] is not group:
            raise RuntimeError("batches must be finished in the order they were begun")
        self._open.popleft()
        if group.error is not None:
            raise group.error
        if group.held is not None:
            return _placed(group.size, group.places, _execute(group.held))
        return self._read(group)

    def write_all(self, requests: Sequence[NewRequest], commands: Iterable[Command]) -> list[str]:
        """A whole batch in one ordinary pipeline (after a failed stream); loads the script first."""
        if requests:
            self.client.script_load(self.frontier.scripts.enqueue.script)
        pipe = self.client.pipeline(transaction=False)
        try:
            places = self.frontier.enqueue_in(pipe, requests)
            for command in commands:
                command(pipe)
        except Exception as exc:
            raise WriteRefused(last_line(exc)) from exc
        return _placed(len(requests), places, _execute(pipe)) if len(pipe) else []  # len(): Cluster pipelines too

    def abandon(self) -> None:
        """Forget every open batch (they will be read from Kafka again) and the connection."""
        self._open.clear()
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.disconnect()
            self._conn = None

    # --- the stream ------------------------------------------------------------------------------
    def _stream(self, group: Group, pipe: Any, enqueues: int) -> None:
        if self._conn is None:
            self._conn = self.client.connection_pool.make_connection()  # ours alone: replies stay in order
            self._loaded = set()
        # A restarted Redis has lost its scripts: load them in the same stream, ahead of use.
        loads: list[Sent] = [(("SCRIPT LOAD", s.script), {}) for s in self._new_scripts(pipe, enqueues > 0)]
        first = len(group.sent) + len(loads)  # enqueue_in puts its enqueue calls first
        group.enqueues.extend(range(first, first + enqueues))
        commands = loads + list(pipe.command_stack)
        self._conn.send_packed_command(self._conn.pack_commands([args for args, _ in commands]))
        group.sent.extend(commands)

    def _new_scripts(self, pipe: Any, has_enqueue: bool) -> list[Any]:
        scripts = {s.sha: s for s in getattr(pipe, "scripts", ())}
        if has_enqueue:
            scripts[self.frontier.scripts.enqueue.sha] = self.frontier.scripts.enqueue
        fresh = [s for sha, s in scripts.items() if sha not in self._loaded]
        self._loaded.update(s.sha for s in fresh)
        return fresh

    def _read(self, group: Group) -> list[str]:
        replies: list[Any] = []
        failure: Exception | None = None
        try:
            for args, options in group.sent:
                try:
                    replies.append(self.client.parse_response(self._conn, args[0], **options))
                except redis.ResponseError as exc:  # read on: the connection stays in step
                    failure = failure or exc
                    replies.append(exc)
        except redis.RedisError as exc:
            self._break(exc)
            raise
        if failure is not None:
            raise failure
        return _placed(group.size, group.places, [replies[i] for i in group.enqueues])

    def _break(self, exc: Exception, refused: Group | None = None) -> None:
        """The connection is lost: every group still on it fails (the caller writes them again). A
        refused write fails its own group with `exc` and the others as a lost connection would."""
        lost = redis.ConnectionError("connection closed after a refused write") if refused is not None else exc
        for group in self._open:
            group.error = group.error or (exc if group is refused else lost)
        self.close()


def _execute(pipe: Any) -> list[Any]:
    """A pipeline's replies; what fails before Redis sees it (encoding a value) is a WriteRefused."""
    try:
        replies: list[Any] = pipe.execute()
    except RETRIABLE:
        raise
    except Exception as exc:
        raise WriteRefused(last_line(exc)) from exc
    return replies


def _placed(size: int, places: list[list[int]], replies: Iterable[Any]) -> list[str]:
    """Each request's status (queued / replayed / ...) from the enqueue replies, the only list
    replies of a batch, in the order of the enqueue calls."""
    out = [""] * size
    enqueues = [reply for reply in replies if isinstance(reply, list)]
    for positions, reply in zip(places, enqueues, strict=True):
        for position, status in zip(positions, reply, strict=True):
            out[position] = status.decode() if isinstance(status, bytes) else str(status)
    return out
