"""Redis, ZooKeeper and Apache Kafka (or Tansu) started together under one run directory.

Layout of `run_dir`: `<name>/` (data), `<name>.log` (stdout and stderr), `<name>.pid`, for
name in redis, zookeeper, kafka. Used by the test session fixture and by benchmarks.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from utils.services.argv import HOST, SERVICE_NAMES, service_argv
from utils.services.postgres import postgres_ready
from utils.services.probes import broker_ready, redis_ready, zookeeper_ready
from utils.services.process import LocalService, Probe, ServiceError, free_ports

log = logging.getLogger(__name__)

PROBES: dict[str, Probe] = {
    "redis": redis_ready, "zookeeper": zookeeper_ready, "kafka": broker_ready, "postgres": postgres_ready,
}  # fmt: skip


class LocalServices:
    """The started services by name, with typed accessors and a context-manager form."""

    def __init__(self, run_dir: Path, services: dict[str, LocalService]) -> None:
        self.run_dir = run_dir
        self.services = services

    def __enter__(self) -> LocalServices:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()

    def __getitem__(self, name: str) -> LocalService:
        try:
            return self.services[name]
        except KeyError:
            raise ServiceError(f"{name} was not started (started: {', '.join(self.services)})") from None

    @property
    def redis(self) -> LocalService:
        """The Redis service."""
        return self["redis"]

    @property
    def zookeeper(self) -> LocalService:
        """The ZooKeeper service."""
        return self["zookeeper"]

    @property
    def broker(self) -> LocalService:
        """The Kafka broker (service name "kafka")."""
        return self["kafka"]

    def stop_all(self, timeout: float = 10) -> None:
        """Stop every service, last started first; a failure to stop one does not spare the others."""
        errors: list[str] = []
        for service in reversed(list(self.services.values())):
            try:
                service.stop(timeout)
            except OSError as exc:
                errors.append(f"{service.name}: {exc}")
        if errors:
            raise ServiceError("could not stop " + "; ".join(errors))


def build_service(name: str, run_dir: Path, port: int, kafka: str = "apache") -> LocalService:
    """A not yet started service `name` laid out under `run_dir` (`kafka`: "apache" or "tansu")."""
    data_dir = run_dir / name
    try:
        argv = service_argv(name, port, data_dir, kafka)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # unwritable run dir, jars missing

        raise ServiceError(f"{name}: cannot build its command line: {exc}") from exc
    return LocalService(
        name=name,
        argv=argv,
        port=port,
        log_path=run_dir / f"{name}.log",
        data_dir=data_dir,
        probe=PROBES[name],
        host=HOST,
        pid_path=run_dir / f"{name}.pid",
    )


def _ports(names: list[str], configured: dict[str, int | None]) -> dict[str, int]:
    """The configured port of each service, or a distinct free one."""
    spare = iter(free_ports(len(names)))
    return {name: configured.get(name) or next(spare) for name in names}


def start_local_services(
    run_dir: Path,
    redis_port: int | None = None,
    zookeeper_port: int | None = None,
    kafka_port: int | None = None,
    services: Iterable[str] = SERVICE_NAMES,
    timeout: float = 90,
    kafka: str = "apache",
) -> LocalServices:
    """Start the services (all spawned first, then each awaited) on configured or free ports.

    On any failure the ones already started are stopped and the ServiceError (with the failing
    service's log tail) propagates.
    """
    names = list(dict.fromkeys(services))
    unknown = set(names) - set(SERVICE_NAMES)
    if unknown:
        raise ServiceError(f"unknown services {sorted(unknown)}; expected some of {list(SERVICE_NAMES)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    configured = {"redis": redis_port, "zookeeper": zookeeper_port, "kafka": kafka_port}
    ports = _ports(names, configured)
    started = LocalServices(run_dir, {})
    began = time.monotonic()
    try:
        for name in names:
            service = build_service(name, run_dir, ports[name], kafka)
            service.start()
            started.services[name] = service
        for service in started.services.values():
            service.wait_ready(max(timeout - (time.monotonic() - began), 0.1))
    except BaseException:
        started.stop_all()
        raise
    log.info(
        "local services %s ready in %.2f s under %s", ", ".join(names), time.monotonic() - began, run_dir
    )
    return started
