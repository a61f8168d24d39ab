"""Issue 31: the demo site's changing pages: Poisson versions, time compression, ETag/Last-Modified/304."""

from __future__ import annotations

from email.utils import formatdate

from utils.demosite.changing import ChangingPages


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_versions_follow_the_rates_and_the_speed() -> None:
    clock = Clock()
    pages = ChangingPages("127.0.0.1:8000", [0.0, 0.01, 1.0], speed=10.0, clock=clock)
    clock.now += 1000  # 10,000 s of site time
    assert pages.version(0) == 0
    assert 60 <= pages.version(1) <= 140  # ~100 expected
    assert 9_000 <= pages.version(2) <= 11_000  # ~10,000 expected
    assert pages.version(2) == pages.version(2)  # drawn once: every answer agrees


def test_etag_and_last_modified_answer_304_until_the_page_changes() -> None:
    clock = Clock()
    pages = ChangingPages("127.0.0.1:8000", [0.0, 0.5], clock=clock)
    status, _, body, headers = pages.answer("/fresh/0.html") or (0, "", b"", "")
    assert status == 200
    assert b"Product 0" in body
    etag = headers.split("ETag: ")[1].split("\r\n")[0]
    modified = headers.split("Last-Modified: ")[1].split("\r\n")[0]
    assert modified == formatdate(clock.now, usegmt=True)
    clock.now += 3600
    assert pages.answer("/fresh/0.html", etag)[:3] == (304, "text/html; charset=utf-8", b"")
    assert pages.answer("/fresh/0.html", "", modified)[0] == 304
    assert pages.answer("/fresh/0.html", '"0-7"')[0] == 200
    first = pages.answer("/fresh/1.html")
    assert first is not None
    clock.now += 60  # ~30 changes of page 1
    assert pages.answer("/fresh/1.html", first[3].split("ETag: ")[1].split("\r\n")[0])[0] == 200
    assert pages.answers == {200: 4, 304: 2}


def test_without_validators_the_same_body_comes_back_until_it_changes() -> None:
    clock = Clock()
    pages = ChangingPages("127.0.0.1:8000", [0.0], validators=False, clock=clock)
    first, again = pages.answer("/fresh/0.html", '"0-0"'), pages.answer("/fresh/0.html")
    assert first == again
    assert first is not None
    assert first[0] == 200
    assert first[3] == ""


def test_the_index_links_every_page_and_other_paths_are_not_its() -> None:
    pages = ChangingPages("127.0.0.1:8000", [0.0] * 3)
    index = pages.answer("/fresh/index.html")
    assert index is not None
    assert all(f'href="/fresh/{i}.html"'.encode() in index[2] for i in range(3))
    assert pages.answer("/fresh/3.html") is None
    assert pages.answer("/other.html") is None
