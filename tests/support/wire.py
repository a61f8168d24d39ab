"""Redis, ZooKeeper, a Kafka broker and (for the sink and revisit roles) PostgreSQL that each
component role reaches through links of its own, one Toxiproxy proxy per (role, service), so a test
cuts or slows exactly one link.

A pytest plugin module (tests/conftest.py): the `wire` fixture is the worker's wire for every role of
the pipeline, started on first use and kept for the session, so the fault modules' tests share its
start and go to any worker; each test starts with every link healed.

Redis, ZooKeeper and PostgreSQL need nothing but the proxy's address. Kafka clients reconnect to the
address the broker advertises, so the broker gets one listener per role, each advertised at that
role's proxy; the test's own clients use the plain listener and never cross a proxy.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.support.postgres import Postgres, start_postgres
from tests.support.services import SERVICE_START_TIMEOUT, started_or_fail
from tests.support.toxiproxy import Toxiproxy, toxiproxy_service
from utils.services import LocalService, LocalServices
from utils.services.argv import HOST
from utils.services.kafka import kafka_argv
from utils.services.local import PROBES, build_service
from utils.services.process import free_ports

ROLES = ("crawler", "kafka-monitor", "redis-monitor")
PIPELINE_ROLES = (*ROLES, "sink", "revisit", "rest")  # every component between a crawl request and its row
SERVICES = ("redis", "kafka", "zookeeper")
POSTGRES_ROLES = ("sink", "revisit")  # the roles with a link to PostgreSQL


def listener(role: str) -> str:
    """The broker listener name of a role (letters only: `kafka-monitor` -> `KAFKAMONITOR`)."""
    return "".join(ch for ch in role.upper() if ch.isalpha())


def broker_config(port: int, controller: int, role_ports: dict[str, tuple[int, int]]) -> dict[str, str]:
    """Listener settings: the plain one on `port`, and per role one on its own port advertised at
    its proxy's port (`role_ports`: role -> (listener port, proxy port))."""
    names = {role: listener(role) for role in role_ports}
    return {
        "listeners": ",".join([f"PLAINTEXT://{HOST}:{port}", f"CONTROLLER://{HOST}:{controller}"]
                              + [f"{names[r]}://{HOST}:{own}" for r, (own, _) in role_ports.items()]),
        "advertised.listeners": ",".join([f"PLAINTEXT://{HOST}:{port}"]
                                         + [f"{names[r]}://{HOST}:{proxy}" for r, (_, proxy) in role_ports.items()]),
        "listener.security.protocol.map": ",".join(["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
                                                   + [f"{n}:PLAINTEXT" for n in names.values()]),
    }  # fmt: skip


class Wire:
    """The services, the Toxiproxy in front of them and each role's settings to reach them through it."""

    def __init__(self, services: LocalServices, toxiproxy: Toxiproxy, addresses: dict[tuple[str, str], str],
                 postgres: Postgres | None = None) -> None:  # fmt: skip
        self.services = services
        self.toxiproxy = toxiproxy
        self.addresses = addresses  # (role, service) -> the proxy's listen address
        self.postgres = postgres  # the server behind the `postgres` links (the tests' own clients reach it directly)

    @staticmethod
    def link(role: str, service: str) -> str:
        """The proxy (link) name of `role` -> `service`."""
        return f"{role}-{service}"

    def settings_for(self, role: str) -> dict[str, str]:
        """The `SHOAL_*`-less settings that send `role`'s clients through its links."""
        redis_host, _, redis_port = self.addresses[(role, "redis")].rpartition(":")
        found = {
            "REDIS_HOST": redis_host, "REDIS_PORT": redis_port,
            "KAFKA_HOSTS": self.addresses[(role, "kafka")],
            "ZOOKEEPER_HOSTS": self.addresses[(role, "zookeeper")],
        }  # fmt: skip
        if (role, "postgres") in self.addresses and self.postgres is not None:
            found["SINK_POSTGRES_DSN"] = f"postgresql://shoal@{self.addresses[(role, 'postgres')]}/shoal"
            found["SINK_POSTGRES_PASSWORD"] = self.postgres.password
        return found


def _broker(run_dir: Path, port: int, controller: int, role_ports: dict[str, tuple[int, int]]) -> LocalService:
    data_dir = run_dir / "kafka"
    argv = kafka_argv(HOST, port, data_dir, controller, extra=broker_config(port, controller, role_ports))
    return LocalService(
        name="kafka", argv=argv, port=port,
        log_path=run_dir / "kafka.log", data_dir=data_dir, probe=PROBES["kafka"], host=HOST,
        pid_path=run_dir / "kafka.pid",
    )  # fmt: skip


@contextlib.contextmanager
def start_wire(run_dir: Path, roles: Iterable[str] = ROLES, timeout: float = 90) -> Iterator[Wire]:
    """Toxiproxy, Redis, ZooKeeper and the broker on free loopback ports, every role's links created;
    all stopped by pid at the end (a failing start raises ServiceError with the log tail)."""
    roles = list(roles)
    run_dir.mkdir(parents=True, exist_ok=True)
    ports = iter(free_ports(5 + 5 * len(roles)))  # distinct: free_port() twice may give one port twice
    proxy_server = toxiproxy_service(run_dir, next(ports))
    started = LocalServices(run_dir, {"toxiproxy": proxy_server})
    postgres: Postgres | None = None
    pg_root: Path | None = None
    try:
        proxy_server.start()
        proxy_server.wait_ready(timeout)
        api = Toxiproxy(proxy_server.address)
        for name in ("redis", "zookeeper"):
            started.services[name] = build_service(name, run_dir, next(ports))
        role_ports = {role: (next(ports), next(ports)) for role in roles}
        kafka_port, controller = next(ports), next(ports)
        started.services["kafka"] = _broker(run_dir, kafka_port, controller, role_ports)
        for name in ("redis", "zookeeper", "kafka"):
            started.services[name].start()
        if set(roles) & set(POSTGRES_ROLES):  # while the broker boots, the slowest to answer
            postgres, pg_root = start_postgres()
        addresses: dict[tuple[str, str], str] = {}
        for role in roles:
            for name in ("redis", "zookeeper"):
                addresses[(role, name)] = api.proxy(Wire.link(role, name), started.services[name].address, next(ports))
            own, proxy_port = role_ports[role]
            addresses[(role, "kafka")] = api.proxy(Wire.link(role, "kafka"), f"{HOST}:{own}", proxy_port)
            if postgres is not None and role in POSTGRES_ROLES:
                addresses[(role, "postgres")] = api.proxy(Wire.link(role, "postgres"), postgres.service.address,
                                                          next(ports))  # fmt: skip
        for name in ("redis", "zookeeper", "kafka"):
            started.services[name].wait_ready(timeout)
        yield Wire(started, api, addresses, postgres)
    finally:
        started.stop_all()
        if postgres is not None:
            postgres.service.stop()
            shutil.rmtree(pg_root or "", ignore_errors=True)


@pytest.fixture(scope="session")
def pipeline_wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    """Services behind Toxiproxy with links for every role of PIPELINE_ROLES, this worker's alone (its
    faults disturb no test on the session services), started by the first test that asks."""
    with contextlib.ExitStack() as stack:
        run_dir = tmp_path_factory.mktemp("wire")
        yield started_or_fail(lambda: stack.enter_context(start_wire(run_dir, PIPELINE_ROLES, SERVICE_START_TIMEOUT)),
                              "the wire's services")  # fmt: skip


@pytest.fixture
def wire(pipeline_wire: Wire) -> Iterator[Wire]:
    """The worker's wire with every link healed before and after the test (whatever it left cut)."""
    pipeline_wire.toxiproxy.reset()
    yield pipeline_wire
    pipeline_wire.toxiproxy.reset()
