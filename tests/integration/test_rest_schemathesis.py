"""Schemathesis against the gateway's OpenAPI document: no generated request gets a 5xx.

Bounded in examples and time; the report is kept in test-artifacts/schemathesis.txt.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCHEMATHESIS = Path(sys.executable).parent / "st"
MAX_SECONDS = 40  # fuzzing repeats until this budget is spent


def test_no_generated_request_gets_a_server_error(services, tmp_path) -> None:
    with gateway_cluster(services, tmp_path, WAIT_FOR_RESPONSE_TIME=0.2, KAFKA_FEED_TIMEOUT=5.0) as cluster:
        client_of(cluster).close()  # GREEN: Kafka and Redis connected
        run = subprocess.run(
            [
                str(SCHEMATHESIS), "run", f"{base_url(cluster)}/openapi.json",
                "--checks", "not_a_server_error", "--max-examples", "15", "--max-time", str(MAX_SECONDS),
                "--workers", "1", "--seed", "20240607", "--generation-database", "none",
                "--request-timeout", "15", "--no-color",
            ],
            capture_output=True, text=True, timeout=MAX_SECONDS + 150, cwd=tmp_path,
        )  # fmt: skip
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "schemathesis.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "not_a_server_error" not in run.stdout  # named only when the check fails
    assert " passed" in run.stdout
