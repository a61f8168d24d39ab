"""`shoal up --services ...,postgres`: the node runs Debian's PostgreSQL and a sink that stores the firehose;
`shoal down` leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.kafka import produce
from tests.support.services import wait_until
from tests.support.sink import page
from utils.services import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def _shoal(options: list[str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "utils.cli.main", *options, *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.fixture
def pg_node() -> Iterator[dict[str, Any]]:
    """A node on free ports whose run dir the `postgres` user cannot enter (0700, as /root and Debian 12's
    home directories are): as root, PostgreSQL's data goes under SERVICE_DATA_ROOT instead (issue 36)."""
    root = Path(tempfile.mkdtemp(prefix="shoal-node-"))
    root.chmod(0o700)
    data_root = Path(tempfile.mkdtemp(prefix="shoal-data-"))
    redis, kafka, zookeeper, rest, postgres = free_ports(5)
    prefix = f"pg{uuid.uuid4().hex[:6]}"
    options = [
        "-s", f"REDIS_PORT={redis}", "-s", f"KAFKA_HOSTS=127.0.0.1:{kafka}",
        "-s", f"ZOOKEEPER_HOSTS=127.0.0.1:{zookeeper}", "-s", f"REST_PORT={rest}",
        "-s", f"RUN_DIR={root}", "-s", f"KAFKA_TOPIC_PREFIX={prefix}",
        "-s", f"SINK_POSTGRES_DSN=postgresql://shoal@127.0.0.1:{postgres}/shoal",
        "-s", f"SERVICE_DATA_ROOT={data_root}",
    ]  # fmt: skip
    yield {"options": options, "kafka": f"127.0.0.1:{kafka}", "postgres": postgres, "prefix": prefix, "root": root,
           "data_root": data_root}  # fmt: skip
    _shoal(options, "down")
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(data_root, ignore_errors=True)


def _expected_data_dir(node: dict[str, Any]) -> Path:
    """As root: under SERVICE_DATA_ROOT, in the directory named by the run dir's node id; else the run dir."""
    run_dir = node["root"] / "default"
    if os.geteuid() != 0:
        return run_dir / "postgres"
    node_id = (run_dir / "node-id").read_text(encoding="utf-8").strip()
    assert (node["data_root"] / node_id / "owner").read_text(encoding="utf-8").strip() == str(run_dir)
    return node["data_root"] / node_id / "postgres"


def _stored(port: int) -> int:
    try:
        with psycopg.connect(f"postgresql://shoal@127.0.0.1:{port}/shoal", connect_timeout=2) as connection:
            row = connection.execute("SELECT count(*) FROM shoal.pages").fetchone()
    except psycopg.Error:
        return 0
    return int(row[0]) if row else 0


def test_a_node_with_postgres_stores_the_firehose_and_stops_cleanly(pg_node: dict[str, Any]) -> None:
    options = pg_node["options"]
    up = _shoal(options, "up", "--crawlers", "0", "--services", "kafka,redis,zookeeper,postgres")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "services:postgres" in up.stdout
    assert "shoal:sink" in up.stdout

    messages = [page(f"http://127.0.0.19:8190/n{i}.html", f"<p>{i}</p>", i) for i in range(25)]
    produce(pg_node["kafka"], f"{pg_node['prefix']}.crawled_firehose", messages)
    wait_until(lambda: _stored(pg_node["postgres"]) == 25, 90, interval=0.5,
               message="the node's sink did not store the 25 pages")  # fmt: skip
    data_dir = _expected_data_dir(pg_node)
    assert (data_dir / "PG_VERSION").exists()
    status = _shoal(options, "status", "--json")
    assert json.loads(status.stdout)["data"]["postgres"] == str(data_dir), status.stdout

    down = _shoal(options, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    leftover = subprocess.run(["pgrep", "-f", str(pg_node["root"])], capture_output=True, text=True, check=False)
    assert leftover.stdout.strip() == ""
