"""Shoal's alerts (issue 33) checked by the real `promtool` (Debian's `prometheus` package, in the
Makefile's TEST_DEBIAN_PACKAGES): the rules parse, every alert has a unit test where it fires and
one where it stays silent (docker/prometheus/alerts_test.yml), a changed threshold fails those
tests, the Helm chart renders the same rules as a PrometheusRule, and every alert has a runbook."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.unit.test_helm_chart import CHART, KUBE, run_helm

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docker" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "docker" / "prometheus" / "alerts_test.yml"
RUNBOOKS = ROOT / "docs" / "operations" / "runbooks.md"


def promtool(*args: str, cwd: Path = RULES.parent) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    assert found, "no promtool: `make test-system-deps` installs Debian's prometheus package"
    return subprocess.run([found, *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd)


def alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_is_tested_firing_and_silent() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    assert set(alerts()) == firing == silent
    assert set(alerts()) == {"ShoalDeadLettersGrowing", "ShoalCrawlNoProgress", "ShoalNoLiveSpider",
                             "ShoalDomainPaused", "ShoalKafkaMonitorLagGrowing", "ShoalSinkLagGrowing",
                             "ShoalRedisMemoryNearLimit"}  # fmt: skip


def test_a_changed_threshold_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests pin each threshold: 0.2/s dead letters raised to 0.6/s no longer fires."""
    (tmp_path / "alerts.yml").write_text(RULES.read_text().replace("[5m])) > 0.2", "[5m])) > 0.6"))
    (tmp_path / "alerts_test.yml").write_text(RULE_TESTS.read_text())
    done = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "ShoalDeadLettersGrowing" in done.stdout + done.stderr


def test_the_helm_chart_renders_the_same_rules() -> None:
    assert (CHART / "files" / "alerts.yml").read_text() == RULES.read_text()
    done = run_helm("template", "shoal", str(CHART), "--kube-version", KUBE, "--set", "prometheusRule.enabled=true",
                    "--show-only", "templates/prometheusrule.yaml")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rule = yaml.safe_load(done.stdout)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    off = run_helm("template", "shoal", str(CHART), "--kube-version", KUBE)
    assert off.returncode == 0
    assert "PrometheusRule" not in off.stdout  # the operator's CRD may be absent: off by default


def test_every_alert_has_a_runbook() -> None:
    headings = {re.sub(r"[^a-z0-9]", "", line.lower()) for line in RUNBOOKS.read_text().splitlines()
                if line.startswith("#")}  # fmt: skip
    for name, rule in alerts().items():
        assert name.lower() in headings, f"no runbook section for {name}"
        assert rule["annotations"]["runbook"] == f"docs/operations/runbooks.md#{name.lower()}"


def _seconds(duration: str) -> int:
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


def test_the_dashboard_evaluates_the_rules_thresholds_and_durations() -> None:
    """The gateway's conditions (rest/alerting.py, rest/pushback.py) use alerts.yml's figures: change a
    rule and this fails until the ALERT_* defaults or the constants follow."""
    from rest import alerting, pushback
    from utils.config import default_settings as d

    rules = alerts()
    dead = re.search(r"\[(\w+)\]\)\) > ([\d.]+)", rules["ShoalDeadLettersGrowing"]["expr"])
    assert dead, rules["ShoalDeadLettersGrowing"]["expr"]
    assert (_seconds(dead[1]), float(dead[2])) == (d.ALERT_DEAD_LETTER_WINDOW, d.ALERT_DEAD_LETTER_RATE)
    assert _seconds(rules["ShoalDeadLettersGrowing"]["for"]) == d.ALERT_DEAD_LETTER_FOR
    for alert in alerting.LAG_ALERTS.values():
        lag = re.search(r"\) > (\d+)\s+and sum\(deriv\(.*\[(\w+)\]\)\) > 0", rules[alert]["expr"])
        assert lag, rules[alert]["expr"]
        figures = (int(lag[1]), _seconds(lag[2]), _seconds(rules[alert]["for"]))
        assert figures == (d.ALERT_LAG_MESSAGES, d.ALERT_LAG_WINDOW, d.ALERT_LAG_FOR)
    assert {a: _seconds(rules[a]["for"]) for a in alerting.FOR_SECONDS} == alerting.FOR_SECONDS
    assert f"[{pushback.NO_PROGRESS_WINDOW // 60}m]" in rules["ShoalCrawlNoProgress"]["expr"]
    assert f"> {pushback.MEMORY_SHARE}" in rules["ShoalRedisMemoryNearLimit"]["expr"]
