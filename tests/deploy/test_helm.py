"""deploy/helm/ft-gateway: the chart lints, renders every example, its objects validate
offline against the Kubernetes schemas (kubernetes-validate's bundled JSON schemas), its
config is one the gateway accepts, every attachment fails closed, and in proxy mode it
says what deploy/kubernetes says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bench.tools import installed
from gateway.extproc.server import refusals
from gateway.settings import Settings
from tests.support.helm import CHART, EXAMPLES, find, helm, render
from tests.support.paths import POLICY, ROOT

KUBERNETES = "1.33.0"
# Kinds of other projects' CRDs (not in kubernetes-validate): Istio's and the Prometheus
# Operator's validate with their @kubernetes-models validators (scripts/k8s-schemas,
# tests/deploy/crds.mjs); Envoy Gateway's and kgateway's schemas install from no
# registry here, so the tests of their attachments check them field by field.
VALIDATED_BY_NODE = ("EnvoyFilter", "ServiceMonitor")
CUSTOM = {
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "EnvoyExtensionPolicy": "gateway.envoyproxy.io/v1alpha1",
    "ClientTrafficPolicy": "gateway.envoyproxy.io/v1alpha1",
    "EnvoyFilter": "networking.istio.io/v1alpha3",
    "GatewayExtension": "gateway.kgateway.dev/v1alpha1",
    "TrafficPolicy": "gateway.kgateway.dev/v1alpha1",
}
CASES = [None, *EXAMPLES]


def _name(values: Path | None) -> str:
    return "defaults" if values is None else values.stem


def _config(objects: tuple[dict[str, Any], ...]) -> Settings:
    text = find(objects, "ConfigMap", "ft-gateway-config")["data"]["config.yaml"]
    return Settings.model_validate(yaml.safe_load(text))


def _container(objects: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (container,) = find(objects, "Deployment", "ft-gateway")["spec"]["template"]["spec"][
        "containers"
    ]
    assert isinstance(container, dict)
    return container


@pytest.mark.parametrize("values", CASES, ids=_name)
def test_the_chart_lints(values: Path | None) -> None:
    done = helm("lint", ".", *(["-f", str(values)] if values else []))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("values", CASES, ids=_name)
def test_every_object_validates_against_the_kubernetes_schemas(values: Path | None) -> None:
    objects = render(values)
    assert objects
    for obj in objects:
        if obj["kind"] in CUSTOM:
            assert obj["apiVersion"] == CUSTOM[obj["kind"]]
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_istio_and_prometheus_operator_objects_validate_against_their_crds_schemas() -> None:
    schemas = installed("k8s-schemas")
    objects = [o for values in CASES for o in render(values) if o["kind"] in VALIDATED_BY_NODE]
    assert {o["kind"] for o in objects} == set(VALIDATED_BY_NODE)
    lines = "".join(json.dumps(o) + "\n" for o in objects)
    checked = subprocess.run(
        ["node", str(ROOT / "tests" / "deploy" / "crds.mjs"), schemas],
        input=lines,
        capture_output=True,
        text=True,
        check=True,
    )
    verdicts = [json.loads(line) for line in checked.stdout.splitlines()]
    assert len(verdicts) == len(objects)
    assert [v for v in verdicts if v["errors"] is not None] == []
    # The validators do refuse what their schema forbids.
    broken = {**objects[0], "spec": {"configPatches": [{"applyTo": "NOPE"}]}}
    if objects[0]["kind"] != "EnvoyFilter":
        broken = {**objects[0], "spec": {"endpoints": "not a list"}}
    refused = subprocess.run(
        ["node", str(ROOT / "tests" / "deploy" / "crds.mjs"), schemas],
        input=json.dumps(broken) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(refused.stdout)["errors"]


@pytest.mark.parametrize("values", CASES, ids=_name)
def test_the_rendered_config_is_one_the_gateway_takes(values: Path | None) -> None:
    objects = render(values)
    settings = _config(objects)
    command = _container(objects)["args"][:2]
    assert command in (["ft-gateway", "serve"], ["ft-gateway", "extproc"])
    if command[1] == "extproc":
        assert (settings.extproc.host, settings.extproc.port) == ("0.0.0.0", 9002)
        assert refusals(settings) == []  # it starts: no rate limits in extproc mode
        assert settings.store.backend != "redis"
    else:
        assert settings.rate_limits.store == "redis"
        assert (
            settings.rate_limits.redis.url
            == settings.store.url
            == ("redis://ft-gateway-redis:6379/0")
        )
    policy = find(objects, "ConfigMap", "ft-gateway-policy")["data"]["ft-serve.yaml"]
    assert policy == POLICY.read_text()
    assert str(settings.policy) == "/etc/ft-gateway/policy/ft-serve.yaml"


def test_extproc_mode_serves_grpc_with_grpc_health_probes() -> None:
    objects = render(CHART / "examples" / "extproc.yaml")
    container = _container(objects)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "grpc": 9002,
        "metrics": 9090,
    }
    assert container["readinessProbe"]["grpc"] == {
        "port": 9002,
        "service": "envoy.service.ext_proc.v3.ExternalProcessor",
    }
    assert container["livenessProbe"]["grpc"] == {"port": 9002}
    service = find(objects, "Service", "ft-gateway")
    (grpc,) = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
    assert grpc["appProtocol"] == "kubernetes.io/h2c"
    assert not [o for o in objects if o["metadata"]["name"] == "ft-gateway-redis"]


def test_envoy_gateway_fails_closed_with_a_body_buffer_past_32_kib() -> None:
    objects = render(CHART / "examples" / "envoy-gateway.yaml")
    (ext,) = find(objects, "EnvoyExtensionPolicy")["spec"]["extProc"]
    assert ext["failOpen"] is False
    assert ext["processingMode"]["request"] == {"body": "Buffered"}
    assert ext["backendRefs"] == [{"name": "ft-gateway", "port": 9002}]
    assert ext["messageTimeout"] == "5s"
    buffer = find(objects, "ClientTrafficPolicy")["spec"]
    assert buffer["connection"]["bufferLimit"] == "9Mi"
    assert buffer["targetRefs"][0]["kind"] == "Gateway"


def test_istio_fails_closed_before_the_router() -> None:
    objects = render(CHART / "examples" / "istio.yaml")
    envoy_filter = find(objects, "EnvoyFilter")
    assert envoy_filter["metadata"]["namespace"] == "istio-system"
    inserted, listener = envoy_filter["spec"]["configPatches"]
    assert inserted["applyTo"] == "HTTP_FILTER" and inserted["patch"]["operation"] == (
        "INSERT_BEFORE"
    )
    filter_config = inserted["patch"]["value"]["typed_config"]
    assert filter_config["failure_mode_allow"] is False
    assert filter_config["processing_mode"]["request_body_mode"] == "BUFFERED"
    assert filter_config["grpc_service"]["envoy_grpc"]["cluster_name"] == (
        "outbound|9002||ft-gateway.llm.svc.cluster.local"
    )
    assert listener["patch"]["value"]["per_connection_buffer_limit_bytes"] == 9437184


def test_kgateway_fails_closed_though_its_default_is_open() -> None:
    objects = render(CHART / "examples" / "kgateway.yaml")
    extension = find(objects, "GatewayExtension")["spec"]
    assert extension["type"] == "ExtProc"
    assert extension["extProc"]["failOpen"] is False
    assert extension["extProc"]["grpcService"]["backendRef"] == {"name": "ft-gateway", "port": 9002}
    policy = find(objects, "TrafficPolicy")["spec"]["extProc"]
    assert policy["extensionRef"] == {"name": "ft-gateway"}
    assert policy["processingMode"]["requestBodyMode"] == "BUFFERED"


def test_an_attachment_without_extproc_mode_is_refused() -> None:
    done = helm("template", "ft-gateway", ".", "--set", "attach.istio.enabled=true")
    assert done.returncode != 0 and "mode: extproc" in done.stderr
    done = helm("template", "ft-gateway", ".", "--set", "mode=sidecar")
    assert done.returncode != 0 and "mode must be proxy or extproc" in done.stderr


def _kustomize(name: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "deploy" / "kubernetes" / name).read_text())
    assert isinstance(data, dict)
    return data


def test_the_chart_says_what_the_kustomize_manifests_say() -> None:
    objects = render(None)
    chart = find(objects, "Deployment", "ft-gateway")["spec"]
    ours = _kustomize("deployment.yaml")["spec"]
    pod, their_pod = chart["template"]["spec"], ours["template"]["spec"]
    for key in ("securityContext", "terminationGracePeriodSeconds", "automountServiceAccountToken"):
        assert pod[key] == their_pod[key], key
    (container,), (theirs,) = pod["containers"], their_pod["containers"]
    for key in (
        "args",
        "env",
        "ports",
        "readinessProbe",
        "livenessProbe",
        "startupProbe",
        "lifecycle",
        "resources",
        "securityContext",
        "volumeMounts",
        "name",
    ):
        assert container[key] == theirs[key], key
    assert chart["strategy"] == ours["strategy"]
    volumes = {v["name"]: {k: x for k, x in v.items() if k != "configMap"} for v in pod["volumes"]}
    their_volumes = {
        v["name"]: {k: x for k, x in v.items() if k != "configMap"} for v in their_pod["volumes"]
    }
    assert volumes == their_volumes
    assert (
        find(objects, "Service", "ft-gateway")["spec"]["ports"]
        == (_kustomize("service.yaml")["spec"]["ports"])
    )
    assert find(objects, "HorizontalPodAutoscaler")["spec"] == _kustomize("hpa.yaml")["spec"]
    assert (
        find(objects, "PodDisruptionBudget")["spec"]["minAvailable"]
        == (_kustomize("pdb.yaml")["spec"]["minAvailable"])
    )
    redis = find(objects, "Deployment", "ft-gateway-redis")["spec"]["template"]["spec"]
    their_redis = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "redis.yaml").read_text())
    assert redis["containers"] == their_redis["spec"]["template"]["spec"]["containers"]
    assert redis["securityContext"] == their_redis["spec"]["template"]["spec"]["securityContext"]
    text = find(objects, "ConfigMap", "ft-gateway-config")["data"]["config.yaml"]
    their_text = _kustomize("config.yaml")["data"]["config.yaml"]
    assert yaml.safe_load(text) == yaml.safe_load(their_text)
