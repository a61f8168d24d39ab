"""`shoal dump --markdown`: each page's Markdown under a comment naming its URL (no sockets)."""

from __future__ import annotations

from utils.cli.kafka_tools import render
from utils.cli.main import build_parser


def test_markdown_option_prints_the_markdown_and_says_when_a_page_has_none() -> None:
    args = build_parser().parse_args(["dump", "crawled_firehose", "--markdown"])
    page = {"url": "http://127.0.0.1/a", "body": "<h1>A</h1>", "markdown": "# A\n\n- one\n- two"}
    assert render(page, args) == "<!-- http://127.0.0.1/a -->\n# A\n\n- one\n- two\n"
    assert "no markdown" in render({"url": "http://127.0.0.1/b", "body": "<p>b</p>"}, args)
