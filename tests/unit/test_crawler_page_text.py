"""Whether a body served as text is sent as text: the byte count of control characters agrees with
the count over the decoded text, in every encoding and at the one-in-a-thousand bound (no sockets)."""

from __future__ import annotations

import random

import pytest
from scrapy import Request
from scrapy.http import TextResponse

from crawler.page import _CONTROLS, CONTROLS_WINDOW, is_text

URL = "http://site.test/page"
CONTROLS = [chr(c) for c in (*range(0x09), 0x0B, *range(0x0E, 0x20), 0x7F)]
TEXT = "Grüße, 世界 — naïve café\tform feed\f\r\n<p>text</p> "


def reference(body: bytes, encoding: str) -> bool:
    """The rule spelled out: decodes strictly, at most one control character per thousand in the window."""
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError:
        return False
    controls = len(_CONTROLS.findall(text, 0, CONTROLS_WINDOW))
    return controls * 1000 <= min(len(text), CONTROLS_WINDOW)


def sample(rng: random.Random, encoding: str, length: int, controls: int) -> bytes:
    alphabet = [c for c in TEXT if c.encode(encoding, "ignore")]
    chars = alphabet * (length // len(alphabet) + 1)
    rng.shuffle(chars)
    chars = chars[:length]
    for _ in range(controls):
        chars[rng.randrange(length)] = rng.choice(CONTROLS)
    return "".join(chars).encode(encoding)


@pytest.mark.parametrize("encoding", ["utf-8", "cp1252", "latin-1", "ascii", "utf-16", "shift_jis"])
def test_the_count_of_control_characters_agrees_with_the_text_around_the_bound(encoding: str) -> None:
    rng = random.Random(encoding)
    for length in (1, 999, 1000, 1001, 20_000, 30_011):
        for controls in {0, 1, length // 1000, length // 1000 + 1, length // 500}:
            body = sample(rng, encoding, length, controls)
            response = TextResponse(URL, body=body, encoding=encoding, request=Request(URL))
            assert is_text(response) == reference(body, encoding), (encoding, length, controls)


def test_a_body_over_the_window_is_judged_on_its_first_characters_only() -> None:
    head = b"a" * CONTROLS_WINDOW
    response = TextResponse(URL, body=head + b"\x00" * 5000, encoding="utf-8", request=Request(URL))
    assert is_text(response)  # the NULs lie past the window, as the text count reads it
    noisy = TextResponse(URL, body=b"\x00" * 2000 + head, encoding="utf-8", request=Request(URL))
    assert not is_text(noisy)


def test_random_bytes_in_a_one_byte_encoding_are_not_text() -> None:
    body = random.Random(31).randbytes(64 * 1024)  # every byte decodes in latin-1: the controls tell
    assert reference(body, "latin-1") is False
    assert is_text(TextResponse(URL, body=body, encoding="latin-1", request=Request(URL))) is False
