"""Proxy credentials are removed from everything Shoal shows: logs, answers, dead letters."""

from __future__ import annotations

from utils.config.redact import redact_request, redact_url
from utils.frontier import dead_letters
from utils.schemas import answers

SECRET = "http://alice:s3cret@proxy.local:3128"


def test_a_proxy_url_loses_its_credentials_only() -> None:
    assert redact_url(SECRET) == "http://***@proxy.local:3128"
    assert redact_url("http://proxy.local:3128") == "http://proxy.local:3128"
    assert redact_request({"proxy": SECRET, "url": "http://a.com"}) == {
        "proxy": "http://***@proxy.local:3128",
        "url": "http://a.com",
    }


def test_answers_and_dead_letters_never_carry_the_password() -> None:
    request = {"url": "http://a.com", "appid": "app", "crawlid": "c", "spiderid": "link", "proxy": SECRET}
    shown = [
        answers.encode(answers.error_answer(request, "bad", "cause")),
        answers.encode(answers.dead_letter(request, "bad", "kafka-monitor")),
        answers.encode(dead_letters.record(request, "boom", 500, 3, "crawler")),
    ]
    assert all(b"s3cret" not in text and b"alice" not in text for text in shown)
    assert request["proxy"] == SECRET  # the stored request itself keeps what the crawler needs
