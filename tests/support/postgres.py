"""A real PostgreSQL for the sink's tests: Debian's server, initdb into a temporary directory, a free port.

The session server needs a password (scram-sha-256), so the sink's password handling is exercised
for real; each test gets its own PostgreSQL schema. The directory is outside pytest's basetemp
(mode 0700), which the `postgres` user the server runs as under root could not enter.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.support.services import started_or_fail
from utils.services import free_port
from utils.services.postgres import postgres_service
from utils.services.process import LocalService

PASSWORD = "sink-test-pw-7f3a"  # the test server's superuser password; tests check it never reaches a log


@dataclass
class Postgres:
    """A running server and how to reach it."""

    service: LocalService
    password: str

    @property
    def dsn(self) -> str:
        """The DSN without the password, as SINK_POSTGRES_DSN takes it."""
        return f"postgresql://shoal@{self.service.host}:{self.service.port}/shoal"

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.dsn, password=self.password, autocommit=True)

    def settings(self, schema: str) -> dict[str, str]:
        """The SHOAL_* values a sink needs to write into `schema` of this server."""
        return {"SINK_POSTGRES_DSN": self.dsn, "SINK_POSTGRES_PASSWORD": self.password, "SINK_DB_SCHEMA": schema}


def start_postgres(password: str = PASSWORD) -> tuple[Postgres, Path]:
    root = Path(tempfile.mkdtemp(prefix="shoal-pg-"))
    root.chmod(0o711)  # searchable by the postgres user, not listable

    def start() -> LocalService:
        service = postgres_service(root, free_port(), password)
        service.start()
        try:
            service.wait_ready(60)
        except BaseException:
            service.stop()
            raise
        return service

    return Postgres(started_or_fail(start, "PostgreSQL"), password), root


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """The session's PostgreSQL (stopped by pid at the end, its directory removed)."""
    server, root = start_postgres()
    yield server
    server.service.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_postgres() -> Iterator[Postgres]:
    """A PostgreSQL for one test that stops, kills or restarts it."""
    server, root = start_postgres()
    yield server
    server.service.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_schema() -> str:
    """A PostgreSQL schema name no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}"
