"""Settings layers: defaults < file < SHOAL_* environment < command line, typed by the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.config.errors import ConfigError
from utils.config.settings import Settings, default_values


def test_defaults_keep_scrapy_cluster_names_and_values() -> None:
    s = Settings.load(environ={})
    assert (s["QUEUE_HITS"], s["QUEUE_WINDOW"], s["DUPEFILTER_TIMEOUT"]) == (10, 60, 600)
    assert s["KAFKA_TOPIC_PREFIX"] == "demo"
    assert s.incoming_topic == "demo.incoming"
    assert s.topic("crawled_firehose") == "demo.crawled_firehose"
    assert s.zookeeper_config_path == "/scrapy-cluster/crawler/all"


def test_environment_values_take_the_type_of_the_default() -> None:
    env = {
        "SHOAL_QUEUE_HITS": "25",
        "SHOAL_QUEUE_MODERATED": "false",
        "SHOAL_KAFKA_HOSTS": "a:1,b:2",
        "SHOAL_LEASE_TIMEOUT": "7.5",
        "SHOAL_KAFKA_MONITOR_PLUGINS": '{"x.Y": 5}',
    }
    s = Settings.load(environ=env)
    assert s["QUEUE_HITS"] == 25
    assert s["QUEUE_MODERATED"] is False
    assert s.get_list("KAFKA_HOSTS") == ["a:1", "b:2"]
    assert s["LEASE_TIMEOUT"] == 7.5
    assert s["KAFKA_MONITOR_PLUGINS"]["x.Y"] == 5  # dicts merge key by key
    assert "kafka_monitor.plugins.crawl.CrawlHandler" in s["KAFKA_MONITOR_PLUGINS"]


def test_layers_apply_in_order_file_then_environment_then_command_line(tmp_path: Path) -> None:
    settings_file = tmp_path / "local.py"
    settings_file.write_text("QUEUE_HITS = 11\nQUEUE_WINDOW = 30\nREDIS_DB = 3\n")
    s = Settings.load(
        settings_file=settings_file,
        environ={"SHOAL_QUEUE_WINDOW": "40", "SHOAL_REDIS_DB": "4"},
        overrides=["REDIS_DB=5"],
    )
    assert (s["QUEUE_HITS"], s["QUEUE_WINDOW"], s["REDIS_DB"]) == (11, 40, 5)


def test_a_plugin_set_to_none_is_disabled(tmp_path: Path) -> None:
    settings_file = tmp_path / "local.json"
    settings_file.write_text('{"KAFKA_MONITOR_PLUGINS": {"kafka_monitor.plugins.crawl.CrawlHandler": null}}')
    s = Settings.load(settings_file=settings_file, environ={})
    assert s["KAFKA_MONITOR_PLUGINS"]["kafka_monitor.plugins.crawl.CrawlHandler"] is None


@pytest.mark.parametrize(
    ("environ", "overrides"),
    [
        ({"SHOAL_NO_SUCH_SETTING": "1"}, None),
        ({}, ["NO_SUCH_SETTING=1"]),
        ({"SHOAL_QUEUE_HITS": "many"}, None),
        ({"SHOAL_QUEUE_MODERATED": "maybe"}, None),
        ({}, ["QUEUE_HITS"]),
    ],
)
def test_unknown_or_unreadable_settings_are_start_up_errors(environ, overrides) -> None:
    with pytest.raises(ConfigError):
        Settings.load(environ=environ, overrides=overrides)


def test_every_default_is_documented_with_a_comment() -> None:
    source = Path("utils/config/default_settings.py").read_text().splitlines()
    for name in default_values():
        line = next(line for line in source if line.startswith(f"{name} ") or line.startswith(f"{name}:"))
        assert "#" in line, f"{name} has no comment giving its unit and meaning"
