"""Extraction worker processes: each page within EXTRACT_SECONDS_MAX and EXTRACT_MEMORY_MAX, off the caller.

One dispatcher thread per worker process keeps up to AHEAD pages (AHEAD_CHARS of HTML) sent ahead
of the worker's answers and waits on its pipe (no GIL held while it waits): the worker goes from one
page to the next without waiting for this thread, which on a busy crawler waits for the GIL and on
a loaded machine for a core (one page at a time, the pages/s with extraction on halved at load 20).
Each page is bounded from the moment it is the oldest unanswered one. A worker that overruns its
time is killed and replaced; one that exceeds its address-space limit (RLIMIT_AS) fails that page
with a MemoryError or dies, and is replaced: either way that page's answer is a failure, never a
stall, and the pages sent behind it go to a fresh worker. Workers are spawned (never forked from a
process with a reactor and threads) on the first page.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import resource
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

log = logging.getLogger(__name__)

START_SECONDS = 60.0  # seconds a new worker may take to import its extractors and say it is ready
AHEAD = 8  # pages sent to a worker before its first answer comes back
# Characters of HTML in flight to one worker: below a socket pair's buffer, so a send never blocks
# while the worker is blocked sending an answer. A larger page is sent alone.
AHEAD_CHARS = 64 * 1024
REPLACED = ("timeout", "worker died", "memory")  # a worker that answered so is killed and replaced


@dataclass(frozen=True)
class Job:
    """One page to extract from: its decoded HTML (already cut to the byte bound), URL and what to return."""

    html: str
    url: str
    kinds: tuple[str, ...]
    fingerprint: bool


@dataclass
class Result:
    """The extraction fields, or why there are none (`error`: timeout, memory, worker died, or the exception)."""

    fields: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0  # wall time of the page in its worker, pipe included


Done = Callable[[Result], None]


def serve(conn: Connection, memory: int) -> None:
    """A worker's loop: import the extractors, say ready, answer one Job at a time until the pipe closes."""
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    from utils.extract.content import extract  # here only: the crawler process never imports trafilatura

    conn.send("ready")
    while True:
        try:
            job: Job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(Result(extract(job.html, job.url, job.kinds, job.fingerprint)))
        except MemoryError:
            conn.send(Result(error="memory"))
        except Exception as exc:  # noqa: BLE001 - a page the extractor chokes on fails alone
            conn.send(Result(error=f"{type(exc).__name__}: {exc}"[:500]))


class _Worker:
    """One worker process and its end of the pipe."""

    def __init__(self, memory: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, memory), daemon=True, name="shoal-extract")
        self.process.start()
        child.close()
        if not self.conn.poll(START_SECONDS) or self.conn.recv() != "ready":
            self.kill()
            raise RuntimeError("extraction worker did not start")

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class ExtractionPool:
    """`workers` processes; `submit` never blocks, `done(result)` runs on a dispatcher thread."""

    def __init__(self, workers: int, seconds: float, memory: int) -> None:
        self.seconds, self.memory = seconds, memory
        self.jobs: queue.SimpleQueue[tuple[Job, Done] | None] = queue.SimpleQueue()
        self.replaced = 0  # workers killed (time) or lost (memory, crash) and started again
        self._closing = False
        self._workers: set[_Worker] = set()
        self._threads = [threading.Thread(target=self._dispatch, daemon=True, name=f"shoal-extract-{i}")
                         for i in range(max(workers, 1))]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job, done: Done) -> None:
        self.jobs.put((job, done))

    def close(self, wait: float = 2.0) -> None:
        """Pages still queued are answered "shutdown" at once; after `wait` seconds every worker is killed
        (the crawler's SIGTERM budget is seconds, not a page's EXTRACT_SECONDS_MAX)."""
        self._closing = True
        for _ in self._threads:
            self.jobs.put(None)
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        for worker in list(self._workers):
            worker.kill()

    def _dispatch(self) -> None:
        lane = _Lane(self)
        while lane.fill():
            lane.answer_oldest()
        lane.close()

    def start_worker(self) -> _Worker | None:
        try:
            worker = _Worker(self.memory)
        except (RuntimeError, OSError) as exc:
            log.error("Extraction worker failed to start", extra={"error": str(exc)})
            return None
        self._workers.add(worker)
        return worker

    def drop_worker(self, worker: _Worker, url: str = "", reason: str | None = None) -> None:
        """Kill a worker: at the end, or (with the reason) after the page at `url` took it down."""
        worker.kill()
        self._workers.discard(worker)
        if reason is not None:
            self.replaced += 1
            log.warning("Extraction worker replaced", extra={"url": url[:200], "reason": reason})


class _Lane:
    """One dispatcher thread's worker and the pages sent to it, oldest first."""

    def __init__(self, pool: ExtractionPool) -> None:
        self.pool = pool
        self.worker: _Worker | None = None
        self.sent: deque[tuple[Job, Done]] = deque()  # in the worker's pipe or being extracted
        self.again: deque[tuple[Job, Done]] = deque()  # to send first: behind a page that took its worker down
        self.since = 0.0  # when the oldest page in `sent` became the one the worker is on
        self.stopping = False  # the pool's close reached this thread

    def fill(self) -> bool:
        """Send pages until AHEAD are in flight (waiting for one only when none is); False when done."""
        while len(self.sent) < AHEAD and (self.again or not self.stopping):
            task = self._next()
            if task is None:
                break
            job, done = task
            if self.pool._closing:
                _call(done, Result(error="shutdown"), job)
            elif self.sent and len(job.html) + sum(len(j.html) for j, _ in self.sent) > AHEAD_CHARS:
                self.again.appendleft(task)  # sent once the pages before it are answered
                break
            elif not self._send(task):
                break  # the worker is gone: answer_oldest says "worker died"
        return bool(self.sent or self.again or not self.stopping)

    def _next(self) -> tuple[Job, Done] | None:
        if self.again:
            return self.again.popleft()
        try:
            task = self.pool.jobs.get(block=not self.sent)
        except queue.Empty:
            return None
        self.stopping = self.stopping or task is None
        return task

    def _send(self, task: tuple[Job, Done]) -> bool:
        job, done = task
        if self.worker is None:
            self.worker = self.pool.start_worker()
            if self.worker is None:
                _call(done, Result(error="worker did not start"), job)
                return True
        if not self.sent:
            self.since = time.monotonic()
        self.sent.append(task)
        try:
            self.worker.conn.send(job)
        except (OSError, ValueError):  # a dead worker's pipe (ValueError: already closed)
            return False
        return True

    def answer_oldest(self) -> None:
        """The oldest page's answer; a worker that timed out, ran out of memory or died is replaced,
        and the pages sent behind that page go to the next one."""
        if not self.sent or self.worker is None:
            return
        result = self._receive(self.worker)
        job, done = self.sent.popleft()
        self.since = time.monotonic()
        if result.error in REPLACED:
            self.pool.drop_worker(self.worker, job.url, result.error)
            self.worker = None
            self.again.extendleft(reversed(self.sent))
            self.sent.clear()
        _call(done, result, job)

    def _receive(self, worker: _Worker) -> Result:
        started, seconds = self.since, self.pool.seconds
        try:
            if not worker.conn.poll(max(seconds - (time.monotonic() - started), 0.0)):
                return Result(error="timeout", seconds=time.monotonic() - started)
            result: Result = worker.conn.recv()
        except (EOFError, OSError):
            return Result(error="worker died", seconds=time.monotonic() - started)
        result.seconds = time.monotonic() - started
        return result

    def close(self) -> None:
        if self.worker is not None:
            self.pool.drop_worker(self.worker)


def _call(done: Done, result: Result, job: Job) -> None:
    try:
        done(result)
    except Exception:  # a callback's own bug must not end the dispatcher
        log.exception("Extraction callback failed", extra={"url": job.url[:200]})
