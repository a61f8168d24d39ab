"""Issue 30: no single message can make the kafka monitor's dispatch raise (which rewound and read
the same batch again, forever). Each finding of the review, through the real dispatcher and plugins
on records built in memory; whatever one message does, it alone is answered and dead-lettered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_monitor.batch import Batch, Origin
from kafka_monitor.dispatch import HANDLER_FAILED, NOT_JSON, Dispatcher
from tests.unit.test_kafka_monitor_dispatch import Record, dispatcher, records
from utils.config.redact import redact_secrets, redact_url
from utils.frontier import NewRequest
from utils.schemas import answers

GOOD = {"url": "http://good.example.com/", "appid": "goodapp", "crawlid": "good1", "uuid": "good"}


def nested(depth: int, inner: str = "") -> bytes:
    return ("[" * depth + inner + "]" * depth).encode()


def run_with_good(*hostile: Any) -> Batch:
    """The hostile messages between two good crawls, in one batch: both good crawls must be queued."""
    batch = dispatcher().process(records(GOOD, *hostile, {**GOOD, "uuid": "good2"}), Batch())
    assert [r.crawlid for r in batch.requests] == ["good1", "good1"]
    assert batch.failed == len(hostile) == len(batch.dead_letters)
    return batch


def errors(batch: Batch) -> list[dict[str, Any]]:
    return [a for a in batch.answers if a["action"] == "error"]


@pytest.mark.parametrize("proxy", ["http://u:p@h:x", "http://u:p@h:99999", "http://u:p@[::1", "http://u:p@h:-1"])
def test_a_proxy_whose_port_is_no_number_is_answered_and_shown_without_credentials(proxy: str) -> None:
    """Finding 2: `parts.port` raised ValueError while the answer was built, out of the dispatcher."""
    batch = run_with_good({"proxy": proxy}, {**GOOD, "uuid": "p", "proxy": proxy})
    for answer in errors(batch):
        assert "p@" not in json.dumps(answer)
        assert "u:p" not in json.dumps(answer)
    assert redact_url(proxy) in ("http://***@h", "***")


@pytest.mark.parametrize(
    "raw",
    [nested(500), nested(1000), nested(100_000), b"[" * 100_000,
     json.dumps({**GOOD, "attrs": {"x": json.loads(nested(500))}}).encode()],
    ids=["500", "1000", "100000", "unclosed", "in-attrs"],
)  # fmt: skip
def test_deep_nesting_is_refused_with_a_clear_cause(raw: bytes) -> None:
    """Finding 3: 500 nested `[` made redact_secrets raise RecursionError while answering."""
    (answer,) = errors(run_with_good(raw))
    assert answer["error"]["message"] == NOT_JSON
    assert "nested deeper than 64" in answer["error"]["cause"] or "depth limit" in answer["error"]["cause"]


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+400", "1" + "0" * 400 + ".5", "NaN", "-Infinity"])
def test_a_non_finite_number_anywhere_is_refused_naming_where(number: str) -> None:
    """Finding 4: `attrs: {"x": 1e400}` parsed as inf and was queued (the check looked at bytes)."""
    raw = b'{"url": "http://good.example.com/", "appid": "goodapp", "crawlid": "c", "attrs": {"x": [%s]}}'
    crawl, other = errors(run_with_good(raw % number.encode(), b'{"colour": %s}' % number.encode()))
    assert crawl["error"]["cause"].startswith("attrs.x.0: non-finite number")
    assert other["error"]["cause"].startswith("colour: non-finite number")


def test_integers_beyond_64_bits_are_refused() -> None:
    (answer,) = errors(run_with_good(json.dumps({**GOOD, "attrs": {"n": 2**64}}).encode()))
    assert answer["error"]["cause"] == "attrs.n: integer beyond 64 bits"


@pytest.mark.parametrize(("field", "value"), [("crawlid", "."), ("crawlid", ".."), ("spiderid", ".."),
                                              ("spiderid", "."), ("appid", "...x/..")])  # fmt: skip
def test_dot_and_dot_dot_are_no_ids(field: str, value: str) -> None:
    """Finding 11: `.` and `..` were accepted as crawlid and spiderid (path and key segments)."""
    (answer,) = errors(run_with_good({**GOOD, field: value}))
    assert answer["error"]["cause"].startswith(f"{field}:")
    batch = dispatcher().process(records({**GOOD, "crawlid": "...", "spiderid": ".a"}), Batch())
    assert batch.failed == 0  # dots are fine inside a name that is neither `.` nor `..`


class HalfWriter:
    """A plugin that adds a request and an answer, then raises: none of it may be written."""

    schema = "stats"
    rank = 1
    stat_name = "HalfWriter"

    def __init__(self, fail: BaseException) -> None:
        self.fail = fail

    @classmethod
    def from_settings(cls, settings: Any, **_: Any) -> HalfWriter:
        return cls(RecursionError("maximum recursion depth exceeded"))

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        batch.requests.append(NewRequest("link", "x.com", 1, "app", "c", "{}", None))
        batch.acknowledge({"action": "stats", "uuid": message["uuid"]})
        batch.commands.append(lambda pipe: None)
        batch.log("half", message)
        raise self.fail


def test_a_plugin_that_raises_half_way_leaves_nothing_of_its_message_and_the_batch_goes_on() -> None:
    stats = {"uuid": "s1", "appid": "goodapp", "stats": "all"}
    batch = dispatcher(**{"tests.unit.test_ingest_never_stalls.HalfWriter": 1}).process(
        records(GOOD, stats, {**GOOD, "uuid": "good2"}), Batch()
    )
    assert [r.crawlid for r in batch.requests] == ["good1", "good1"]
    assert sorted(batch.answer_of) == [0, 1]
    assert not batch.commands
    (answer,) = errors(batch)
    assert (answer["uuid"], answer["error"]["message"]) == ("s1", HANDLER_FAILED)
    assert "RecursionError" in answer["error"]["cause"]
    assert len(batch.dead_letters) == 1
    assert batch.dead_letters[0]["data"]["uuid"] == "s1"


def test_when_the_answer_cannot_be_built_a_minimal_one_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort: building the answer itself raises; the message is still answered and dead-lettered."""

    def broken(*_: Any, **__: Any) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(answers, "error_answer", broken)
    batch = Dispatcher(dispatcher().plugins).process([Record("t", 0, 7, b"not json")], Batch())
    ((answer,), (letter,)) = batch.answers, batch.dead_letters
    assert answer["action"] == "error"
    assert answer["error"]["message"] == NOT_JSON
    assert (letter["topic"], letter["offset"], letter["data"]) == ("t", 7, answers.NOT_SHOWN)
    assert json.loads(answers.encode(answer))["data"] == answers.NOT_SHOWN


def test_answers_of_anything_build_and_encode_without_raising() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    for raw in [deep, {"a": {1, 2}}, {"x": "\ud800", "n": float("nan")}, {"proxy": "http://u:p@h:x"}, b"\xff" * 9000]:
        answer = answers.error_answer(raw, "m", "c" * 5000)
        letter = answers.dead_letter(raw, "e" * 5000, "kafka-monitor")
        for message in (answer, letter):
            encoded = answers.encode(message)
            assert json.loads(encoded)
            assert len(encoded) < 25_000
            encoded.decode("utf-8")  # strict: no lone surrogate reaches the topic
    assert str(redact_secrets(deep)).count("[") == 32  # deeper levels hidden, not recursed into
