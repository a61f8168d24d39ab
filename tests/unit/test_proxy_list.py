"""PROXY_LIST parsing and the credential-free proxy labels."""

from __future__ import annotations

from pathlib import Path

from utils.proxies.pool import parse_proxy_list, redact


def test_labels_drop_credentials() -> None:
    assert redact("http://user:s3cret@127.0.0.1:8888") == "http://127.0.0.1:8888"
    assert redact("https://proxy.example:3128/") == "https://proxy.example:3128"
    assert redact("socks5h://u:p@[::1]:1080") == "socks5h://[::1]:1080"


def test_comma_separated_list_keeps_urls_and_drops_repeats() -> None:
    proxies = parse_proxy_list(" http://a:b@10.0.0.1:1, http://10.0.0.2:2 ,,http://10.0.0.1:1")
    assert [p.label for p in proxies] == ["http://10.0.0.1:1", "http://10.0.0.2:2"]
    assert proxies[1].url == "http://10.0.0.2:2"
    assert parse_proxy_list("") == []


def test_file_list_one_per_line_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "proxies.txt"
    path.write_text("# pool\nhttp://u:p@10.0.0.1:1  # first\n\nhttp://10.0.0.2:2\n")
    proxies = parse_proxy_list(f"@{path}")
    assert [(p.url, p.label) for p in proxies] == [
        ("http://u:p@10.0.0.1:1", "http://10.0.0.1:1"),
        ("http://10.0.0.2:2", "http://10.0.0.2:2"),
    ]
