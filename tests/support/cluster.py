"""Shoal components as real processes against the session services, isolated per test.

Each test gets its own Redis database, topic prefix, consumer group and ZooKeeper path, passed to
the components as `SHOAL_*` environment variables, exactly as an operator would configure them.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from utils.config.settings import Settings
from utils.services import LocalServices

REPO = Path(__file__).resolve().parents[2]
_databases = itertools.count(1)  # database 0 is left to ad-hoc use; 1023 tests per session


def next_database() -> int:
    """A Redis database number no other test of this session uses."""
    return next(_databases)


# Polls and flushes shrunk so tests wait on events, not on timers.
FAST = {
    "SCHEDULER_IDLE_POLL": "0.02",
    "SCHEDULER_FLUSH_INTERVAL": "0.02",
    "REDIS_MONITOR_SLEEP_TIME": "0.02",
    "KAFKA_TOPIC_PARTITIONS": "3",
    "LOG_LEVEL": "INFO",
}


class Component:
    """One `shoal <command>` process with its log in a file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._terminated = False
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "utils.cli.main", *argv], cwd=REPO, env=env,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        """SIGTERM without waiting, once: a second one would cut the graceful exit short."""
        if self.alive() and not self._terminated:
            self.process.send_signal(signal.SIGTERM)
            self._terminated = True

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (unless `terminate` sent it), then SIGKILL after `timeout`; returns the exit code."""
        if self.alive():
            self.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.process.returncode

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


class TestCluster:
    """The per-test configuration and the component processes started under it."""

    __test__ = False  # not a pytest test class

    def __init__(self, services: LocalServices, log_dir: Path, **overrides: Any) -> None:
        tag = uuid.uuid4().hex[:8]
        self.services = services
        self.log_dir = log_dir
        self.prefix = f"test{tag}"
        values = {
            "REDIS_HOST": services.redis.host,
            "REDIS_PORT": str(services.redis.port),
            "REDIS_DB": str(next_database()),
            "KAFKA_HOSTS": services.broker.address,
            "ZOOKEEPER_HOSTS": services.zookeeper.address,
            "ZOOKEEPER_ASSIGN_PATH": f"/shoal-test/{tag}/",
            "KAFKA_TOPIC_PREFIX": self.prefix,
            "KAFKA_GROUP": f"{self.prefix}-group",
            **FAST,
            **{k: str(v) for k, v in overrides.items()},
        }
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        self.env.update({f"SHOAL_{k}": v for k, v in values.items()})
        self.settings = Settings.load(environ=self.env)
        self.components: list[Component] = []

    def start(self, *argv: str, name: str | None = None, settings: dict[str, Any] | None = None) -> Component:
        """Start `shoal <argv>`; `settings` override this cluster's for this process alone."""
        name = name or f"{argv[0]}-{len(self.components)}"
        env = {**self.env, **{f"SHOAL_{k}": str(v) for k, v in (settings or {}).items()}}
        component = Component(name, list(argv), env, self.log_dir / f"{name}.log")
        self.components.append(component)
        return component

    def stop_all(self) -> None:
        """Every component signalled first, then each waited for: their graceful exits (a crawler's
        takes seconds) overlap instead of adding up."""
        for component in self.components:
            component.terminate()
        for component in self.components:
            component.stop()

    def logs(self) -> Iterator[str]:
        for component in self.components:
            yield f"----- {component.name} (pid {component.pid}) -----\n{component.log_tail()}"
