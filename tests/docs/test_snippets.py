"""Every shell and Python snippet of the docs site and the README runs, against a real test cluster.

One cluster (kafka monitor, link crawler, redis monitor, sink on the session's Redis, broker,
ZooKeeper and PostgreSQL) serves every snippet, in page order, in one scratch directory: `SITE` is a
generated site on loopback, `SHOAL_*` point the commands at the cluster. A snippet that cannot run
here carries a `not-run` marker naming the test that covers it (tests/docs/snippets.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.snippets import REPO, RUNNABLE, Snippet, every_snippet, to_run
from tests.support.cluster import TestCluster
from tests.support.postgres import Postgres
from utils.demosite import SiteServer, generate_site
from utils.services import LocalServices, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SNIPPET_TIMEOUT = 60  # seconds; the slowest (a followed crawl of five pages) takes a few


@pytest.fixture
def docs_cluster(services: LocalServices, postgres: Postgres, tmp_path: Path) -> Iterator[tuple[TestCluster, dict]]:
    site = generate_site(hosts=1, pages_per_host=5, seed=3, base_ip_octet=60, port=free_port())
    schema = "shoal"  # the default schema the snippets query
    with postgres.connect() as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    cluster = TestCluster(
        services, tmp_path, QUEUE_HITS=1000, QUEUE_WINDOW=1, QUEUE_MODERATED=False, FINISHED_INTERVAL=0.2,
        SINK_GROUP=f"docs-{uuid.uuid4().hex[:8]}", **postgres.settings(schema),
    )  # fmt: skip
    with SiteServer(site):
        for command in (["kafka-monitor"], ["crawl", "--spider", "link"], ["redis-monitor"], ["sink"]):
            cluster.start(*command)
        env = {**cluster.env, "SITE": site.seed_urls()[0], "PGPASSWORD": postgres.password}
        yield cluster, env
        cluster.stop_all()
    with postgres.connect() as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def run(snippet: Snippet, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if snippet.kind == "python":
        argv = [sys.executable, "-c", snippet.code]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", snippet.code]
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT)


def test_every_unmarked_snippet_runs_against_the_test_cluster(docs_cluster, tmp_path: Path) -> None:
    cluster, env = docs_cluster
    workdir = tmp_path / "reader"
    workdir.mkdir()
    (workdir / ".venv").symlink_to(REPO / ".venv")  # the snippets call .venv/bin/... as from the repo's root
    env = {**env, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    ran, failed = [], []
    for snippet in to_run():
        result = run(snippet, workdir, env)
        ran.append(snippet.id)
        if result.returncode != 0:
            failed.append(f"{snippet.id} exited {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    if failed:
        print("\n".join(cluster.logs()))
    assert failed == []
    assert ran == [snippet.id for snippet in to_run()]
    assert len(ran) >= 5


def test_every_snippet_has_a_language_and_every_marker_names_a_test() -> None:
    for snippet in every_snippet():
        assert snippet.lang, f"{snippet.id}: a fence without a language (sh, python, text, json, ...)"
        if snippet.covered_by:
            path, _, name = snippet.covered_by.partition("::")
            assert (REPO / path).is_file(), f"{snippet.id}: not-run marker names {path}, which does not exist"
            assert not name or f"def {name}(" in (REPO / path).read_text(), f"{snippet.id}: no test {name} in {path}"
            assert snippet.kind, f"{snippet.id}: a not-run marker on a {snippet.lang} block, which never runs"


def test_the_parser_sees_markers_and_runnable_languages(tmp_path: Path) -> None:
    from tests.docs.snippets import parse

    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- not-run: tests/docs/test_snippets.py (why) -->\n\n```sh\nmake run\n```\n\n"
        "```python\nprint(1)\n```\n\n```json\n{}\n```\n"
    )
    found = parse(page)
    assert [(s.lang, s.covered_by, s.kind) for s in found] == [
        ("sh", "tests/docs/test_snippets.py", "shell"), ("python", None, "python"), ("json", None, None),
    ]  # fmt: skip
    assert set(RUNNABLE.values()) == {"shell", "python"}
