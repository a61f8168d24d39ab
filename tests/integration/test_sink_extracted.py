"""The sink stores a page's extraction (text, Markdown, metadata, SimHash) and its near-duplicate verdict;
a near-duplicate its crawl keeps out (`kept_out`) gets a crawl-log line and no pages row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.postgres import Postgres
from tests.support.sink import RunningSink, page, rows, sink_settings, wait_count
from utils.services import LocalServices

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FIRST, SAME, KEPT_OUT = (f"http://127.0.0.46:8190/{name}.html" for name in ("first", "same", "kept-out"))
EXTRACTED = {"text": "River boats\nThe river carried the boats.", "markdown": "# River boats\n\nThe river carried",
             "metadata": {"title": "River boats", "authors": ["Ada River"], "language": "en"},
             "simhash": "0123456789abcdef", "cluster_id": "0123456789abcdef"}  # fmt: skip


@pytest.fixture
def sink_cluster(services: LocalServices, tmp_path: Path, postgres: Postgres, pg_schema: str) -> Iterator[TestCluster]:
    cluster = TestCluster(services, tmp_path)
    sink_settings(cluster, postgres, pg_schema)
    yield cluster
    cluster.stop_all()


def test_text_markdown_metadata_and_duplicate_of_are_stored_and_kept_out_pages_are_not(
    sink_cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    near = {**EXTRACTED, "simhash": "0123456789abcdee", "near_duplicate": True, "duplicate_of": FIRST}
    messages = [page(FIRST, "<p>a</p>", 0, **EXTRACTED), page(SAME, "<p>b</p>", 1, **near),
                page(KEPT_OUT, "<p>c</p>", 2, **near, kept_out=True)]  # fmt: skip
    sink = RunningSink(sink_cluster)
    try:
        produce(sink_cluster.settings.get_list("KAFKA_HOSTS")[0], sink_cluster.settings.topic("crawled_firehose"),
                messages)  # fmt: skip
        wait_count(postgres, pg_schema, "crawl_log", 3)
        stored = {row["url"]: row for row in rows(postgres, pg_schema, "pages", "url")}
    finally:
        sink.close()
    assert set(stored) == {FIRST, SAME}
    first, same = stored[FIRST], stored[SAME]
    assert first["text"] == EXTRACTED["text"]
    assert first["markdown"] == EXTRACTED["markdown"]
    assert first["metadata"] == EXTRACTED["metadata"]
    assert first["near_duplicate"] is None
    assert first["duplicate_of"] is None
    assert same["near_duplicate"] is True
    assert same["duplicate_of"] == FIRST
    assert same["cluster_id"] == first["simhash"]
