"""The Helm chart (deploy/helm/shoal, issue 32) rendered by a real `helm template`: it lints clean,
every object validates against the Kubernetes 1.30 schemas (kubernetes-validate), every container
has probes and limits, and no secret reaches a ConfigMap. Helm is the one `make helm` builds from
the Go module proxy into the cache (the Makefile exports HELM; a missing helm fails, never skips)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "shoal"
KUBE = "1.30.0"
COMPONENTS = {"kafka-monitor", "crawler", "render", "redis-monitor", "rest", "sink", "revisit", "warc"}
OFF_BY_DEFAULT = {"render", "revisit", "warc"}
SECRETS = ["REDIS_PASSWORD", "KAFKA_SASL_PASSWORD", "KAFKA_SSL_KEY_PASSWORD", "SINK_POSTGRES_PASSWORD",
           "REST_API_KEY", "ZOOKEEPER_AUTH"]  # fmt: skip
EVERY_OPTION = [f"components.{name}.enabled=true" for name in sorted(OFF_BY_DEFAULT)] + [
    "serviceMonitor.enabled=true", "networkPolicy.enabled=true", "podDisruptionBudget.enabled=true",
    "components.warc.storage.claimName=warc-files", "settings.QUEUE_HITS=20", "settings.LOG_LEVEL=DEBUG",
    "networkPolicy.restFrom[0].podSelector.matchLabels.role=client",
]  # fmt: skip
KEDA = [*EVERY_OPTION, "autoscaling.keda.enabled=true"]
HPA = [*EVERY_OPTION, "autoscaling.hpa.enabled=true"]
CRD_KINDS = {"ScaledObject": "keda.sh/v1alpha1", "ServiceMonitor": "monitoring.coreos.com/v1",
             "PrometheusRule": "monitoring.coreos.com/v1"}  # fmt: skip


BUILD_WAIT = 900.0  # seconds to wait for `make helm`'s background build (about 3 minutes cold)


def helm() -> str:
    """The helm `make helm` built, waiting for its background build to end (a failed build fails here,
    with its log)."""
    cached = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shoal" / "helm-3.22.0" / "helm"
    built = Path(os.environ.get("HELM") or cached)
    failed, log = built.with_name("helm.failed"), built.with_name("helm.log")
    deadline = time.monotonic() + BUILD_WAIT
    while not os.access(built, os.X_OK) and not failed.exists() and log.exists() and time.monotonic() < deadline:
        time.sleep(1)
    found = str(built) if os.access(built, os.X_OK) else shutil.which("helm")
    build_log = log.read_text()[-3000:] if log.exists() else "(no build log)"
    assert found, f"no helm: `make helm` builds it (go install helm.sh/helm/v3/cmd/helm@v3.22.0); {build_log}"
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=60, check=False)


def render(options: list[str]) -> list[dict[str, Any]]:
    sets = [arg for option in options for arg in ("--set", option)]
    done = run_helm("template", "shoal", str(CHART), "--kube-version", KUBE, *sets)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def by_component(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"] for d in of_kind(docs, kind)}


def containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for d in of_kind(docs, "Deployment") for c in d["spec"]["template"]["spec"]["containers"]]


@pytest.fixture(scope="module")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {"defaults": render([]), "keda": render(KEDA), "hpa": render(HPA)}


@pytest.mark.parametrize("options", [[], KEDA, HPA], ids=["defaults", "keda", "hpa"])
def test_the_chart_lints_clean(options: list[str]) -> None:
    sets = [arg for option in options for arg in ("--set", option)]
    done = run_helm("lint", "--strict", "--kube-version", KUBE, str(CHART), *sets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout  # noqa: PT018


@pytest.mark.parametrize("version", [KUBE, kubernetes_validate.latest_version()])
def test_every_object_validates_against_the_kubernetes_schemas(
    renders: dict[str, list[dict[str, Any]]], version: str
) -> None:
    checked: set[str] = set()
    for docs in renders.values():
        for doc in docs:
            if doc["kind"] in CRD_KINDS:  # custom resources: no schema in Kubernetes' own set
                assert doc["apiVersion"] == CRD_KINDS[doc["kind"]]
                continue
            kubernetes_validate.validate(doc, version, strict=True)  # raises on any unknown or invalid field
            checked.add(doc["kind"])
    assert checked == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy",
                       "HorizontalPodAutoscaler"}  # fmt: skip


def test_every_component_has_a_deployment_and_a_disruption_budget(renders: dict[str, list[dict[str, Any]]]) -> None:
    def components(docs: list[dict[str, Any]], kind: str) -> set[str]:
        return {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in of_kind(docs, kind)}

    assert components(renders["defaults"], "Deployment") == COMPONENTS - OFF_BY_DEFAULT
    assert components(renders["keda"], "Deployment") == COMPONENTS
    assert components(renders["keda"], "PodDisruptionBudget") == COMPONENTS
    args = {c["name"]: c["args"] for c in containers(renders["keda"])}
    assert args["crawler"] == ["crawl", "--spider", "link"]
    assert args["render"] == ["crawl", "--spider", "render"]
    assert (args["warc"], args["revisit"]) == (["warc"], ["revisit"])


def test_every_container_has_probes_and_limits(renders: dict[str, list[dict[str, Any]]]) -> None:
    for docs in renders.values():
        for container in containers(docs):
            assert container["livenessProbe"], container["name"]
            assert container["readinessProbe"], container["name"]
            assert {"cpu", "memory"} <= set(container["resources"]["limits"]), container["name"]
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), container["name"]


def test_no_secret_value_appears_in_a_config_map(renders: dict[str, list[dict[str, Any]]]) -> None:
    for docs in renders.values():
        (config,) = of_kind(docs, "ConfigMap")
        assert not [k for k in config["data"] if any(word in k for word in ("PASSWORD", "API_KEY", "AUTH"))]
        for container in containers(docs):
            secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
            assert secret_env == {f"SHOAL_{k}": {"name": "shoal-secrets", "key": k, "optional": True} for k in SECRETS}
    for key in SECRETS:  # a secret given as a setting is refused, and its value is not printed
        done = run_helm("template", "shoal", str(CHART), "--kube-version", KUBE, "--set", f"settings.{key}=x-{key}")
        assert done.returncode != 0
        assert f"settings.{key} holds a secret" in done.stderr
        assert f"x-{key}" not in done.stdout + done.stderr


def test_only_rest_and_metrics_are_let_in(renders: dict[str, list[dict[str, Any]]]) -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(renders["keda"], "NetworkPolicy")}
    every_pod, rest = policies["shoal-deny-ingress"], policies["shoal-rest-ingress"]
    assert every_pod["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "shoal",
                                                       "app.kubernetes.io/instance": "shoal"}  # fmt: skip
    assert [port["port"] for rule in every_pod["ingress"] for port in rule["ports"]] == [9410]
    assert rest["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "rest"
    assert rest["ingress"] == [{"ports": [{"port": 5343, "protocol": "TCP"}],
                                "from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]  # fmt: skip


def test_keda_scales_crawlers_on_the_polite_capacity_and_consumers_on_lag(
    renders: dict[str, list[dict[str, Any]]],
) -> None:
    scaled = by_component(renders["keda"], "ScaledObject")
    assert set(scaled) == {"crawler", "render", "kafka-monitor", "sink"}
    deployments = {d["metadata"]["name"] for d in of_kind(renders["keda"], "Deployment")}
    for spec in scaled.values():
        assert spec["scaleTargetRef"]["name"] in deployments
        assert spec["minReplicaCount"] >= 1 and spec["maxReplicaCount"] >= spec["minReplicaCount"]  # noqa: PT018
    (crawler,) = scaled["crawler"]["triggers"]
    assert crawler["type"] == "prometheus"
    assert crawler["metadata"]["query"] == 'max(shoal_scaling_recommended_replicas{spiderid="link"})'
    for name in ("kafka-monitor", "sink"):
        (trigger,) = scaled[name]["triggers"]
        assert trigger["type"] == "kafka" and trigger["metadata"]["allowIdleConsumers"] == "false"  # noqa: PT018
    for deployment in of_kind(renders["keda"], "Deployment"):  # the autoscaler owns the replica count
        scaled_one = deployment["metadata"]["labels"]["app.kubernetes.io/component"] in scaled
        assert ("replicas" in deployment["spec"]) is not scaled_one
    hpas = by_component(renders["hpa"], "HorizontalPodAutoscaler")
    assert set(hpas) == set(scaled)
    assert hpas["kafka-monitor"]["maxReplicas"] <= 6  # never more consumers than partitions
    metrics = {name: spec["metrics"][0]["external"]["metric"]["name"] for name, spec in hpas.items()}
    assert metrics == {"crawler": "shoal_scaling_recommended_replicas", "render": "shoal_scaling_recommended_replicas",
                       "kafka-monitor": "shoal_scaling_recommended_consumers",
                       "sink": "shoal_scaling_recommended_consumers"}  # fmt: skip
