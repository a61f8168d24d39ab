"""Extraction worker processes: each page within EXTRACT_SECONDS_MAX and EXTRACT_MEMORY_MAX, off the caller.

One dispatcher thread per worker process hands it one page at a time and waits on its pipe (no GIL
held while it waits). A worker that overruns its time is killed and replaced; one that exceeds its
address-space limit (RLIMIT_AS) fails that page with a MemoryError or dies, and is replaced: either
way that page's answer is a failure, never a stall, and the next page goes to a fresh worker.
Workers are spawned (never forked from a process with a reactor and threads) on the first page.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

log = logging.getLogger(__name__)

START_SECONDS = 60.0  # seconds a new worker may take to import its extractors and say it is ready


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
        worker: _Worker | None = None
        while (task := self.jobs.get()) is not None:
            job, done = task
            if self._closing:
                done(Result(error="shutdown"))
                continue
            try:
                if worker is None:
                    worker = _Worker(self.memory)
                    self._workers.add(worker)
            except (RuntimeError, OSError) as exc:
                log.error("Extraction worker failed to start", extra={"error": str(exc)})
                done(Result(error="worker did not start"))
                continue
            result = self._run(worker, job)
            if result.error in ("timeout", "worker died", "memory"):
                worker.kill()
                self._workers.discard(worker)
                worker = None
                self.replaced += 1
                log.warning("Extraction worker replaced", extra={"url": job.url[:200], "reason": result.error})
            try:
                done(result)
            except Exception:  # a callback's own bug must not end the dispatcher
                log.exception("Extraction callback failed", extra={"url": job.url[:200]})
        if worker is not None:
            worker.kill()
            self._workers.discard(worker)

    def _run(self, worker: _Worker, job: Job) -> Result:
        start = time.monotonic()
        try:
            worker.conn.send(job)
            if not worker.conn.poll(self.seconds):
                return Result(error="timeout", seconds=time.monotonic() - start)
            result: Result = worker.conn.recv()
        except (EOFError, OSError):
            return Result(error="worker died", seconds=time.monotonic() - start)
        result.seconds = time.monotonic() - start
        return result
