"""Issue 30 (finding 11): no log line shows a URL's user:password, whichever code logs it."""

from __future__ import annotations

import io
import json
import logging

import pytest
from scrapy import Request

from crawler.guards import AddressPolicyMiddleware, AddressRefused
from utils.config.address_policy import AddressPolicy
from utils.config.log import JsonFormatter, TextFormatter, redact_userinfo
from utils.config.settings import Settings

SECRET_URL = "http://alice:S3CRET-PW@169.254.169.254/latest/"


@pytest.fixture(params=["json", "text"])
def captured(request: pytest.FixtureRequest):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("test") if request.param == "json" else TextFormatter("%(message)s %(url)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    yield stream
    root.removeHandler(handler)


def test_the_address_guard_logs_a_refused_url_without_its_credentials(captured: io.StringIO) -> None:
    guard = AddressPolicyMiddleware(AddressPolicy.from_settings(Settings.load(environ={})), robots_maxsize=0)
    with pytest.raises(AddressRefused):
        guard.process_request(Request(SECRET_URL, meta={"spiderid": "link"}))
    text = captured.getvalue()
    assert "Refused by address policy" in text
    assert "S3CRET-PW" not in text
    assert "***@169.254.169.254/latest/" in text


def test_any_line_with_a_url_in_its_message_extras_or_exception_is_redacted(captured: io.StringIO) -> None:
    log = logging.getLogger("tests.redaction")
    log.warning("Dropped %s", SECRET_URL, extra={"url": SECRET_URL, "nested": {"proxy": "https://u:S3CRET-PW@p:1"}})
    try:
        raise ValueError(f"cannot fetch {SECRET_URL}")
    except ValueError:
        log.exception("failed", extra={"url": "http://plain.example.com/a@b"})
    text = captured.getvalue()
    assert "S3CRET-PW" not in text
    assert "http://plain.example.com/a@b" in text  # an @ in the path is no credential


def test_json_lines_stay_json_and_keep_the_host() -> None:
    record = logging.makeLogRecord({"msg": "x", "url": 'http://a:b"c@host.example/'})
    entry = json.loads(JsonFormatter().format(record))
    assert entry["url"] == "http://***@host.example/"
    assert redact_userinfo("http://ebay.com\\@allowed.org/") == "http://ebay.com\\@allowed.org/"  # no userinfo
