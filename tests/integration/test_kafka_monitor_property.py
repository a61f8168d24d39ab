"""Property: whatever arrives on the incoming topic, the monitor stays up and answers it.

Hypothesis generates hundreds of messages (bytes, any JSON, and the reference examples mutated
field by field), they go through the real broker into one in-process monitor writing to the real
Redis, and every message that carries a string uuid must get an answer on the outbound topic or
a job in `shoal:jobs`; every rejected message is also dead-lettered.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader, produce
from utils.config.clients import redis_client
from utils.frontier import keys

pytestmark = pytest.mark.integration

EXAMPLES = [
    {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "abc123", "maxdepth": 2, "priority": 90},
    {"url": "http://example.com/a", "appid": "testapp", "crawlid": "c1", "uuid": "x", "expires": 0,
     "allowed_domains": ["example.com"], "attrs": {"k": [1]}, "headers": {"A": "b"}, "method": "POST", "body": "a=1"},
    {"action": "info", "appid": "testapp", "crawlid": "ABC123", "uuid": "abc12333", "spiderid": "link"},
    {"action": "stop", "appid": "testapp", "crawlid": "ist234", "uuid": "1ist234", "spiderid": "link"},
    {"action": "dead-letters", "appid": "testapp", "crawlid": "ist234", "uuid": "d1", "spiderid": "link"},
    {"appid": "testapp", "uuid": "hij1", "stats": "spider"},
    {"uuid": "abc123", "appid": "madisonTest", "action": "domain-update", "domain": "dmoztools.net",
     "hits": 60, "window": 60, "scale": 0.9},
]  # fmt: skip
FIELDS = sorted({field for example in EXAMPLES for field in example} | {"colour", "splash", "ts"})

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from(["", "x" * 41, "http://", "info", "stop", "all", "link"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
mutation = st.one_of(
    st.tuples(st.just("drop"), st.sampled_from(FIELDS), st.none()),
    st.tuples(st.just("set"), st.sampled_from(FIELDS), json_values),
    st.tuples(st.just("set"), st.sampled_from(FIELDS), st.sampled_from([0, -1, 1, 100, 101, 3, 4, 2000, 2001, 1.0])),
)


def mutate(example: dict[str, Any], changes: list[tuple[str, str, Any]]) -> dict[str, Any]:
    message = dict(example)
    for kind, field, value in changes:
        if kind == "drop":
            message.pop(field, None)
        else:
            message[field] = value
    return message


message_strategy = st.one_of(
    st.binary(max_size=40),
    json_values,
    st.sampled_from(EXAMPLES),
    st.builds(mutate, st.sampled_from(EXAMPLES), st.lists(mutation, min_size=1, max_size=3)),
    st.builds(mutate, st.sampled_from(EXAMPLES), st.lists(mutation, min_size=1, max_size=3)),
)
_tags = itertools.count()


def tagged(message: Any) -> tuple[Any, str | None]:
    """Give a string uuid a unique value (keeping an over-long one over-long); None = no uuid."""
    if not isinstance(message, dict) or not isinstance(message.get("uuid"), str):
        return message, None
    tag = f"p{next(_tags)}"
    uuid = tag + "x" * max(0, len(message["uuid"]) - len(tag))
    return {**message, "uuid": uuid}, uuid


@pytest.fixture
def monitor(cluster: TestCluster):
    km = KafkaMonitor.from_settings(cluster.settings.copy_with(LOG_LEVEL="WARNING"))
    yield km
    km.close()


@pytest.mark.timeout(240)
@settings(
    max_examples=5, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
@given(st.lists(message_strategy, min_size=60, max_size=100))
def test_every_message_with_a_uuid_gets_an_answer_or_a_job(
    cluster: TestCluster, monitor: KafkaMonitor, messages: list[Any]
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    pairs = [tagged(m) for m in messages]
    uuids = {uuid for _, uuid in pairs if uuid is not None}
    outbound = TopicReader(bootstrap, cluster.settings.topic("outbound_firehose"))
    dead = TopicReader(bootstrap, cluster.settings.topic("dead_letter"))
    try:
        produce(
            bootstrap, cluster.settings.incoming_topic, [m if not isinstance(m, str) else m.encode() for m, _ in pairs]
        )
        handled, deadline = 0, time.monotonic() + 60
        while handled < len(pairs) and time.monotonic() < deadline:
            handled += monitor.run_once()  # raising here would fail the property: the monitor must not
        assert handled == len(pairs)

        jobs = {_text(fields[b"uuid"]) for _, fields in redis_client(cluster.settings).xrange(keys.JOBS)}

        def all_answered(got: list[Any]) -> bool:
            answered = {a.get("uuid") for a in got if isinstance(a, dict)}
            return uuids <= answered | jobs

        answers = outbound.wait_for(all_answered, timeout=30, message="a message with a uuid got no answer")
        errors = [a for a in answers if isinstance(a, dict) and a.get("action") == "error"]
        acks = any(isinstance(a, dict) and a.get("action") == "crawl" for a in answers)
        event(f"jobs: {bool(jobs & uuids)}, acks: {acks}")  # --hypothesis-show-statistics: both kinds occur
        dead.wait_for(lambda got: len(got) >= len(errors), timeout=30)
        assert all(e["error"]["message"] and isinstance(e["server_time"], int) for e in errors)
    finally:
        outbound.close()
        dead.close()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
