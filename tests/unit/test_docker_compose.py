"""docker/: the compose file, the Dockerfile, Prometheus and Grafana configs, checked without a Docker
engine against what the code reads: settings, `shoal` commands, exported metric names.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from utils.cli.main import COMMANDS, build_parser
from utils.config.settings import Settings
from utils.frontier.metrics import FrontierCollector
from utils.observability.metrics.registry import REGISTRY

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
SHOAL_SERVICES = {"kafka-monitor", "redis-monitor", "rest", "crawler"}
SERVICES = SHOAL_SERVICES | {"kafka", "redis", "zookeeper", "prometheus", "grafana"}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    return loaded


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(key): str(value).lower() if isinstance(value, bool) else str(value) for key, value in env.items()}


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_every_component_and_service_is_there() -> None:
    assert set(services()) == SERVICES


def test_every_service_has_a_health_check() -> None:
    for name, service in services().items():
        check = service.get("healthcheck", {})
        assert check.get("test"), name
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name


@pytest.mark.parametrize("name", sorted(SHOAL_SERVICES))
def test_every_shoal_variable_is_a_setting_the_code_reads(name: str) -> None:
    env = environment(services()[name])
    shoal = {key: value for key, value in env.items() if key.startswith("SHOAL_")}
    assert shoal, name

    settings = Settings.load(environ=shoal)  # an unknown SHOAL_* name raises ConfigError

    assert settings.get_list("KAFKA_HOSTS") == ["kafka:9092"]
    assert settings.get_str("REDIS_HOST") == "redis"
    assert settings.get_str("ZOOKEEPER_HOSTS") == "zookeeper:2181"
    assert settings.get_str("METRICS_HOST") == "0.0.0.0"
    assert settings.get_int("METRICS_PORT") == 9410  # fixed: Prometheus and the health check find it
    assert settings.get_bool("LOG_JSON")
    assert settings.get_bool("LOG_STDOUT")


def test_the_services_the_settings_name_listen_where_they_say() -> None:
    env = environment(services()["kafka"])
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert "6379" in str(services()["redis"].get("ports", ["6379"]))
    assert "2181" in str(services()["zookeeper"].get("ports", ["2181"]))


def test_shoal_services_run_one_image_whose_command_picks_the_component() -> None:
    shoal = {name: services()[name] for name in SHOAL_SERVICES}
    assert {service["image"] for service in shoal.values()} == {"shoal:latest"}
    assert {json.dumps(service["build"], sort_keys=True) for service in shoal.values()} == {
        json.dumps({"context": "..", "dockerfile": "docker/Dockerfile"}, sort_keys=True)
    }
    commands = {name: service["command"] for name, service in shoal.items()}
    assert {command[0] for command in commands.values()} == {"kafka-monitor", "redis-monitor", "rest", "crawl"}
    for command in commands.values():
        assert command[0] in COMMANDS
        build_parser().parse_args(command)  # the image's entrypoint is `shoal`: these are its arguments


def test_crawlers_run_as_replicas_with_time_to_return_their_leases() -> None:
    crawler = services()["crawler"]

    assert crawler["deploy"]["replicas"] >= 2
    assert "container_name" not in crawler  # a fixed name would forbid replicas
    assert _seconds(crawler["stop_grace_period"]) >= 30  # supervisord gives a crawler 30 s too


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return int(match.group(1))


def test_components_start_once_kafka_redis_and_zookeeper_are_healthy() -> None:
    for name in SHOAL_SERVICES:
        depends = services()[name]["depends_on"]
        assert {dep: cond["condition"] for dep, cond in depends.items()} == {
            "kafka": "service_healthy", "redis": "service_healthy", "zookeeper": "service_healthy",
        }, name  # fmt: skip


def test_kafka_is_the_official_image_in_kraft_mode() -> None:
    kafka = services()["kafka"]
    env = environment(kafka)

    assert kafka["image"].startswith("apache/kafka:")
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert "CONTROLLER://:9093" in env["KAFKA_LISTENERS"]
    assert not any("ZOOKEEPER" in key for key in env)  # KRaft: Kafka itself needs no ZooKeeper
    assert len(base64.urlsafe_b64decode(env["CLUSTER_ID"] + "==")) == 16  # a base64url UUID
    assert int(env["KAFKA_MESSAGE_MAX_BYTES"]) > Settings.load(environ={}).get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE")
    assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in kafka["healthcheck"]["test"][1]


def test_redis_appends_every_write_to_a_volume() -> None:
    redis = services()["redis"]
    command = redis["command"] if isinstance(redis["command"], list) else shlex.split(redis["command"])

    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_redis_keeps_the_frontiers_memory_rules_of_a_local_node() -> None:
    """A full Redis refuses writes rather than evicting frontier keys, as the Redis `shoal up` starts."""
    from utils.services.argv import FRONTIER_TUNING, FULL_POLICY

    command = services()["redis"]["command"]
    pairs = dict(zip(command[1::2], command[2::2], strict=False))
    assert pairs[FULL_POLICY[0]] == FULL_POLICY[1]
    assert pairs[FRONTIER_TUNING[0]] == FRONTIER_TUNING[1]
    assert pairs["--maxmemory"] != "0"


def test_zookeeper_is_the_official_image() -> None:
    assert services()["zookeeper"]["image"].startswith("zookeeper:")


def test_named_volumes_are_declared() -> None:
    declared = set(compose()["volumes"])
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if not source.startswith("."):
                assert source in declared, (name, source)
            else:
                assert (DOCKER / source).exists(), (name, source)


# --- Dockerfile -------------------------------------------------------------------------------------


def _final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    last_from = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last_from:]


def test_the_image_is_slim_python_3_11_run_by_an_unprivileged_user() -> None:
    args = {op: value for op, value in dockerfile() if op == "ARG"}
    assert args["ARG"] == "PYTHON_IMAGE=python:3.11-slim-bookworm"
    final = _final_stage()
    assert final[0] == ("FROM", "${PYTHON_IMAGE}")
    users = [value for op, value in final if op == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    assert any(op == "RUN" and f"useradd --system --uid 10001 --gid {users[-1]}" in value for op, value in final)
    assert ("ENTRYPOINT", '["shoal"]') in final


def test_the_image_environment_holds_only_known_settings() -> None:
    env: dict[str, str] = {}
    for op, value in _final_stage():
        if op == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(value)))
    shoal = {key: value for key, value in env.items() if key.startswith("SHOAL_")}

    settings = Settings.load(environ=shoal)

    assert settings.get_int("METRICS_PORT") == 9410
    assert settings.get_str("REST_HOST") == "0.0.0.0"


def test_the_build_copies_every_package_and_runs_the_install_script() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    sources = [value.split()[:-1] for op, value in dockerfile() if op == "COPY" and not value.startswith("--from")]
    copied = {source for group in sources for source in group}

    assert packages <= copied
    assert {"pyproject.toml", project["project"]["readme"]} <= copied
    assert ("RUN", "sh /usr/local/bin/shoal-install /opt/shoal /src") in dockerfile()
    assert ("COPY", "docker/install.sh /usr/local/bin/shoal-install") in dockerfile()


def test_image_and_compose_share_the_health_check() -> None:
    healthcheck = [value for op, value in dockerfile() if op == "HEALTHCHECK"][0]
    command = json.loads(healthcheck.split("CMD", 1)[1])

    assert command == ["python", "-m", "utils.observability.metrics.health"]
    for name in SHOAL_SERVICES:
        assert services()[name]["healthcheck"]["test"] == ["CMD", *command]


# --- Prometheus and Grafana --------------------------------------------------------------------------


def test_prometheus_scrapes_every_shoal_service_on_the_metrics_port() -> None:
    config = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    shoal = [job for job in config["scrape_configs"] if job["job_name"] == "shoal"][0]
    discovery = shoal["dns_sd_configs"][0]

    assert set(discovery["names"]) == SHOAL_SERVICES
    assert discovery["port"] == 9410
    mounted = services()["prometheus"]["volumes"]
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounted


def exported_names() -> set[str]:
    """Every sample name the code can export: registry families and the frontier collector."""
    families = [*REGISTRY.collect(), *FrontierCollector(None, 1, 1, 0).describe()]
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "info": ["_info"]}
    names = set()
    for family in families:
        names.add(family.name)
        names.update(family.name + suffix for suffix in suffixes.get(family.type, []))
    return names


def test_every_dashboard_query_names_an_exported_metric() -> None:
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "shoal.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\b((?:shoal|process)_[a-z_]+)\b", expr)}
    known = exported_names()

    assert len(exprs) >= 20
    assert sorted(used - known) == []
    wanted = {"shoal_pages_total", "shoal_queue_depth", "shoal_inflight_requests", "shoal_domain_backlog",
              "shoal_throttle_denials_total", "shoal_retries_total", "shoal_dead_letters_total",
              "shoal_kafka_consumer_lag", "shoal_healthy"}  # fmt: skip
    assert wanted <= used  # issue 8: pages/s by status, queues, backlog, throttle, retries, dead letters, lag, health


def test_grafana_provisions_the_datasource_the_dashboard_uses() -> None:
    provisioning = DOCKER / "grafana" / "provisioning"
    datasource = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"][0]
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "shoal.json").read_text())
    provider = yaml.safe_load((provisioning / "dashboards" / "shoal.yml").read_text())["providers"][0]

    uids = {panel["datasource"]["uid"] for panel in dashboard["panels"] if "datasource" in panel}
    assert uids == {datasource["uid"]}
    assert datasource["url"] == "http://prometheus:9090"
    mounts = services()["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts


# --- The compose client's own check, where one is installed ----------------------------------------


def _compose_client() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode == 0:
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone else None


def test_docker_compose_config_accepts_the_file() -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no compose client (`docker compose` plugin or Debian's docker-compose) on this machine")

    done = _config(client, "--services", REDIS_PASSWORD="pw", SHOAL_REST_API_KEY="key")

    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == SERVICES


def _config(client: list[str], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("REDIS_PASSWORD", "SHOAL_REST_API_KEY")}
    return subprocess.run(
        [*client, "-f", str(DOCKER / "docker-compose.yml"), "config", *args], cwd=DOCKER,
        capture_output=True, text=True, timeout=60, check=False, env={**clean, **env},
    )  # fmt: skip


@pytest.mark.parametrize("missing", ["REDIS_PASSWORD", "SHOAL_REST_API_KEY"])
def test_compose_refuses_to_start_without_the_redis_password_or_the_api_key(missing: str) -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no compose client (`docker compose` plugin or Debian's docker-compose) on this machine")
    env = {"REDIS_PASSWORD": "pw", "SHOAL_REST_API_KEY": "key"}
    del env[missing]
    done = _config(client, **env)
    assert done.returncode != 0
    assert missing in done.stderr


def test_only_the_rest_port_is_published_and_the_services_network_is_internal() -> None:
    """The review found Redis without a password, ZooKeeper, plaintext Kafka and a keyless REST on every
    interface (issue 24)."""
    published = {name: service["ports"] for name, service in services().items() if service.get("ports")}
    assert published == {"rest": ["5343:5343"]}
    assert compose()["networks"]["default"]["internal"] is True
    outside = {name for name, service in services().items() if "egress" in (service.get("networks") or [])}
    assert outside == {"rest", "crawler"}


def test_redis_and_the_gateway_require_their_secrets() -> None:
    redis = services()["redis"]
    assert "--requirepass" in redis["command"]
    assert "REDIS_PASSWORD:?" in redis["command"][redis["command"].index("--requirepass") + 1]
    shared = environment(services()["kafka-monitor"])
    assert shared["SHOAL_REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    assert environment(services()["rest"])["SHOAL_REST_API_KEY"].startswith("${SHOAL_REST_API_KEY:?")
