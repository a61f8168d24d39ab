"""docs/reference/timeouts.md's table against the client factories: every row's value is what the
factory passes, and every timeout option the factories pass has a row (no client without a bound)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from psycopg import conninfo

from utils.config import default_settings
from utils.config.clients import consumer_config, kafka_admin_config, producer_config, redis_client, zookeeper_client
from utils.config.postgres import postgres_conninfo
from utils.config.settings import Settings

TABLE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "timeouts.md"
ROW = re.compile(r"^\| ([^|]+) \| `([^`]+)` \| ([^|]+) \|")
TIMEOUT_WORDS = ("timeout", "max_block", "max_poll_interval", "heartbeat", "keepalives", "health_check", "max_wait")


def table() -> dict[tuple[str, str], float]:
    """(client, option) -> the value the table gives (a setting's name: its default)."""
    rows = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            client, option, value = (part.strip() for part in match.groups())
            named = re.fullmatch(r"`([A-Z_]+)` \(.*\)", value)
            rows[(client, option)] = float(getattr(default_settings, named[1]) if named else value)
    return rows


def redis_options(settings: Settings) -> dict[str, Any]:
    client = redis_client(settings)
    kwargs = client.connection_pool.connection_kwargs
    options = {k: v for k, v in kwargs.items() if not k.startswith("orig_") and k != "retry"}  # orig_: copies
    return {**options, "retries": client.get_retry().get_retries()}


def zookeeper_options(settings: Settings) -> dict[str, Any]:
    client = zookeeper_client(settings)
    return {"timeout": client._session_timeout / 1000, "connection_retry.max_delay": client._conn_retry.max_delay}


def postgres_options(settings: Settings) -> dict[str, Any]:
    options = {k: v for k, v in conninfo.conninfo_to_dict(postgres_conninfo(settings)).items() if k != "password"}
    return {**options, "operation_timeout": settings.get_float("SINK_POSTGRES_OPERATION_TIMEOUT")}


CLIENTS: dict[str, Callable[[Settings], dict[str, Any]]] = {
    "Redis": redis_options,
    "Kafka producer": producer_config,
    "Kafka consumer": lambda settings: consumer_config(settings, "group"),
    "Kafka admin": kafka_admin_config,
    "ZooKeeper": zookeeper_options,
    "PostgreSQL": postgres_options,
    "HTTP (crawler)": lambda settings: {"DOWNLOAD_TIMEOUT": settings.get_float("DOWNLOAD_TIMEOUT")},
    "HTTP (public IP)": lambda settings: {"PUBLIC_IP_TIMEOUT": settings.get_float("PUBLIC_IP_TIMEOUT")},
}


@pytest.fixture(scope="module")
def settings() -> Settings:
    return Settings.load(environ={})


def test_every_row_is_what_the_factory_passes(settings: Settings) -> None:
    rows = table()
    assert len(rows) >= 20
    for (client, option), value in rows.items():
        actual = CLIENTS[client](settings)
        assert option in actual, f"{client} is not given {option}"
        assert float(actual[option]) == value, f"{client} {option}: table {value}, code {actual[option]}"


@pytest.mark.parametrize("client", ["Redis", "Kafka producer", "Kafka consumer", "Kafka admin", "PostgreSQL"])
def test_every_timeout_a_factory_passes_has_a_row(settings: Settings, client: str) -> None:
    rows = {option for (name, option) in table() if name == client}
    passed = {option for option, value in CLIENTS[client](settings).items()
              if any(word in option for word in TIMEOUT_WORDS) and value not in (None, 0)}  # fmt: skip
    assert passed <= rows | {"keepalives"}, passed - rows  # keepalives: the on switch of the rows that time them


def test_no_client_leaves_a_read_unbounded(settings: Settings) -> None:
    """The defaults that hang forever: a Redis without a socket timeout, a libpq connection without
    keepalives or a user timeout."""
    assert redis_options(settings)["socket_timeout"]
    assert redis_options(settings)["retries"] == 0  # else a timed-out command is re-sent, a script run twice
    postgres = postgres_options(settings)
    assert postgres["keepalives"] == "1"
    assert int(postgres["tcp_user_timeout"]) > 0
    assert postgres["operation_timeout"] > 0  # the far side acknowledging but never answering
