"""PROXY_LIST parsing, the credential-free proxy names and the labels of their kind and place."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.config.address_policy import proxy_list_urls
from utils.config.proxy_labels import asked_labels, group_name, matches, merged
from utils.frontier.domain_config import DomainConfig
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


def test_entries_carry_labels_after_a_hash_and_plain_entries_stay_valid() -> None:
    value = "http://u:p@10.0.0.1:1#region=de,type=residential,http://10.0.0.2:2,http://10.0.0.3:3#type=dc"
    proxies = parse_proxy_list(value)
    assert [(p.url, p.label, p.labels, p.group) for p in proxies] == [
        ("http://u:p@10.0.0.1:1", "http://10.0.0.1:1", (("region", "de"), ("type", "residential")),
         "region=de,type=residential"),
        ("http://10.0.0.2:2", "http://10.0.0.2:2", (), "default"),
        ("http://10.0.0.3:3", "http://10.0.0.3:3", (("type", "dc"),), "type=dc"),
    ]  # fmt: skip
    assert proxy_list_urls(value) == ["http://u:p@10.0.0.1:1", "http://10.0.0.2:2", "http://10.0.0.3:3"]
    assert [p.labels for p in parse_proxy_list("http://10.0.0.1:1#region=de;type=dc")] == [
        (("region", "de"), ("type", "dc"))
    ]


def test_file_entries_keep_labels_and_comments_follow_a_space(tmp_path: Path) -> None:
    path = tmp_path / "proxies.txt"
    path.write_text("# german pool\nhttp://10.0.0.1:1#region=de,type=residential  # the expensive one\n"
                    "http://10.0.0.2:2 #region=fr\n")  # fmt: skip
    proxies = parse_proxy_list(f"@{path}")
    assert [(p.label, p.group) for p in proxies] == [
        ("http://10.0.0.1:1", "region=de,type=residential"),
        ("http://10.0.0.2:2", "default"),  # ' #' starts a comment
    ]


def test_a_malformed_label_names_its_entry_without_credentials() -> None:
    with pytest.raises(ValueError, match=r"http://10.0.0.1:1: proxy label 'residential' is not key=value") as caught:
        parse_proxy_list("http://u:s3cret@10.0.0.1:1#region=de,residential")
    assert "s3cret" not in str(caught.value)


def test_a_group_is_every_proxy_with_the_labels_asked_and_no_labels_is_the_default_group() -> None:
    has = (("region", "de"), ("type", "residential"))
    assert matches(has, (("region", "de"),))
    assert matches(has, has)
    assert not matches(has, (("region", "fr"),))
    assert not matches(has, ())  # a request that asks for nothing never goes through a labelled proxy
    assert matches((), ())
    assert not matches((), (("region", "de"),))
    assert merged((("region", "us"), ("type", "residential")), (("region", "de"),)) == has  # the request's win
    assert group_name(()) == "default"


def test_asked_labels_take_a_mapping_or_a_string_and_refuse_anything_else() -> None:
    assert asked_labels({"type": "residential", "region": "de"}) == (("region", "de"), ("type", "residential"))
    assert asked_labels("type=residential") == (("type", "residential"),)
    assert asked_labels(None) == asked_labels({}) == asked_labels("") == ()
    for bad in (["region=de"], {"region": ["de"]}, {"re gion": "de"}, {"region": True}, "region"):
        with pytest.raises(ValueError):
            asked_labels(bad)


def test_a_domain_entry_asks_for_labels_and_a_malformed_one_refuses_the_config() -> None:
    config = DomainConfig.parse("domains:\n  WWW.Shop.com: {proxy_labels: {type: residential}}\n"
                                "  b.com: {proxy_labels: 'region=de,type=dc'}\n  c.com: {hits: 1, window: 1}\n")
    assert config.proxy_labels("shop.com") == (("type", "residential"),)
    assert config.proxy_labels("b.com") == (("region", "de"), ("type", "dc"))
    assert config.proxy_labels("c.com") == ()
    with pytest.raises(ValueError, match="shop.com.proxy_labels"):
        DomainConfig.parse("domains:\n  shop.com: {proxy_labels: [residential]}\n")
