"""Where a node lives and what it runs: run directory, local services and every address.

`shoal up`, `shoal service`, `shoal status` and `shoal down` all resolve the same `NodeLayout` from
the settings, so a service started by supervisord binds exactly the port `shoal up` probes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.config.errors import ConfigError
from utils.config.postgres import postgres_address
from utils.config.settings import Settings
from utils.services.argv import HOST, SERVICE_NAMES

DEFAULT_PORTS = {"redis": 6379, "zookeeper": 2181, "kafka": 9092, "postgres": 5432}
NODE_SERVICES = (*SERVICE_NAMES, "postgres")  # PostgreSQL only when asked for: `--services ...,postgres`
SOCKET_PATH_MAX = 100  # bytes; AF_UNIX paths are limited to 108 on Linux, 104 on macOS
STATE_FILE = "node.json"  # what `shoal up` started, for `shoal status`


def repo_root() -> Path:
    """The repository root: the parent of the `utils` package, the programs' working directory."""
    return Path(__file__).resolve().parents[2]


def parse_services(raw: str) -> tuple[str, ...]:
    """`"kafka,redis"` -> those names in NODE_SERVICES order; `"none"` or empty -> none."""
    names = {part.strip().lower() for part in raw.split(",") if part.strip()}
    names.discard("none")
    unknown = names - set(NODE_SERVICES)
    if unknown:
        raise ConfigError(f"unknown local services {sorted(unknown)}; expected some of {list(NODE_SERVICES)}")
    return tuple(name for name in NODE_SERVICES if name in names)


def _first_address(hosts: list[str], default_port: int) -> tuple[str, int]:
    """`host:port` of the first entry of a hosts list (port defaulted when missing)."""
    if not hosts:
        return HOST, default_port
    host, sep, port = hosts[0].rpartition(":")
    if not sep:
        return port or HOST, default_port
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"bad host:port {hosts[0]!r}") from None
    return host or HOST, number


def configured_addresses(settings: Settings) -> dict[str, tuple[str, int]]:
    """Where each service is configured: Redis host/port, first Kafka and ZooKeeper host, REST."""
    return {
        "kafka": _first_address(settings.get_list("KAFKA_HOSTS"), DEFAULT_PORTS["kafka"]),
        "redis": (settings.get_str("REDIS_HOST"), settings.get_int("REDIS_PORT")),
        "zookeeper": _first_address(settings.get_list("ZOOKEEPER_HOSTS"), DEFAULT_PORTS["zookeeper"]),
        "rest": (settings.get_str("REST_HOST"), settings.get_int("REST_PORT")),
        "postgres": postgres_address(settings, HOST, DEFAULT_PORTS["postgres"]),
    }


@dataclass(frozen=True)
class NodeLayout:
    """One node: its name, absolute run directory, local services and the address of everything."""

    node: str
    run_root: Path
    local: tuple[str, ...]
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.run_root / self.node

    @property
    def config_path(self) -> Path:
        return self.run_dir / "supervisord.conf"

    @property
    def pid_path(self) -> Path:
        return self.run_dir / "supervisord.pid"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "supervisor.sock"

    @property
    def supervisord_log(self) -> Path:
        return self.run_dir / "supervisord.log"

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"

    @property
    def state_path(self) -> Path:
        return self.run_dir / STATE_FILE

    def log_path(self, program: str) -> Path:
        """The log of one program, e.g. `redis` or `crawler-00`."""
        return self.log_dir / f"{program}.log"

    def port(self, name: str) -> int:
        return self.addresses[name][1]

    def address(self, name: str) -> str:
        """`host:port` clients use; a local service always listens on 127.0.0.1."""
        host, port = self.addresses[name]
        return f"{HOST if name in self.local else host}:{port}"

    def service_addresses(self) -> dict[str, str]:
        """Every address by name (kafka, redis, zookeeper, rest), as `status --json` reports them."""
        return {name: self.address(name) for name in self.addresses}

    def check_socket_path(self) -> None:
        """ConfigError when the control socket path is too long for AF_UNIX (bind would fail later)."""
        if len(str(self.socket_path).encode()) > SOCKET_PATH_MAX:
            raise ConfigError(
                f"run directory {self.run_dir} is too deep for a unix socket "
                f"(more than {SOCKET_PATH_MAX} bytes); set a shorter RUN_DIR"
            )

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "local": list(self.local), "services": self.service_addresses()}


def resolve_layout(settings: Settings, node: str, services: str | None = None) -> NodeLayout:
    """The node's layout from settings; `services` (from --services) wins over LOCAL_SERVICES."""
    if not node or "/" in node or node in (".", ".."):
        raise ConfigError(f"bad node name {node!r}: one path segment expected")
    raw = settings.get_str("LOCAL_SERVICES") if services is None else services
    return NodeLayout(
        node=node,
        run_root=Path(settings.get_str("RUN_DIR")).absolute(),
        local=parse_services(raw),
        addresses=configured_addresses(settings),
    )


def recorded_addresses(layout: NodeLayout) -> dict[str, str]:
    """The addresses `shoal up` recorded for this node, else those the current settings give."""
    try:
        recorded = json.loads(layout.state_path.read_text(encoding="utf-8"))["services"]
    except (OSError, ValueError, KeyError, TypeError):
        return layout.service_addresses()
    return {str(name): str(address) for name, address in dict(recorded).items()}


def recorded_local(layout: NodeLayout) -> tuple[str, ...]:
    """The local services `shoal up` recorded for this node (it may have had --services), else the
    settings' ones."""
    try:
        recorded = json.loads(layout.state_path.read_text(encoding="utf-8"))["local"]
        return parse_services(",".join(str(name) for name in recorded))
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return layout.local


def command_layout(settings: Settings, node: str, command: str) -> NodeLayout | None:
    """The layout for a `shoal <command>`; None after printing why the settings name no valid node."""
    try:
        return resolve_layout(settings, node)
    except ConfigError as exc:
        print(f"shoal {command}: {exc}")
        return None
