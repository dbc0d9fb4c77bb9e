"""deploy/kubernetes: the manifests parse, agree with each other and with the gateway.

No cluster: each manifest is read with PyYAML and checked against what the
gateway really does (its default port, its probe routes, its config schema,
the policy file it ships).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.routing import Route

from gateway.access.keys import read_keys_file
from gateway.app.factory import create_app
from gateway.policy.loading import parse_policy_text
from gateway.settings import Settings, load_settings
from gateway.yamlsource import parse_yaml
from tests.support.paths import POLICY, ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"


def manifest(name: str) -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    return manifest("deployment.yaml")


@pytest.fixture(scope="module")
def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def container(pod: dict[str, Any]) -> dict[str, Any]:
    (gateway,) = pod["containers"]
    assert isinstance(gateway, dict)
    return gateway


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The config.yaml of the ConfigMap, loaded as the pod would load it."""
    text = manifest("config.yaml")["data"]["config.yaml"]
    path = tmp_path_factory.mktemp("etc") / "config.yaml"
    path.write_text(text)
    return load_settings(path, environ={"FT_GATEWAY_HOST": "0.0.0.0", "FT_GATEWAY_PORT": "8080"})


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    for entry in container["ports"]:
        if entry["name"] == port:
            number: int = entry["containerPort"]
            return number
    raise AssertionError(f"no container port named {port!r}")


def test_every_manifest_parses_and_kustomization_lists_them() -> None:
    kustomization = manifest("kustomization.yaml")
    listed = set(kustomization["resources"])
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files - {"keys-secret.example.yaml"}
    for name in files:
        data = manifest(name)
        assert {"apiVersion", "kind", "metadata"} <= set(data), name


def test_probes_hit_the_gateways_probe_routes_on_its_port(container: dict[str, Any]) -> None:
    defaults = Settings()
    app = create_app(Settings(policy=POLICY))
    routes = {r.path for r in app.routes if isinstance(r, Route) and "GET" in (r.methods or ())}
    probes = {
        kind: container[kind]["httpGet"]
        for kind in ("readinessProbe", "livenessProbe", "startupProbe")
    }
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert probes["livenessProbe"]["path"] == "/healthz"
    for probe in probes.values():
        assert probe["path"] in routes
        assert port_number(container, probe["port"]) == defaults.listen.port
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["FT_GATEWAY_PORT"]) == defaults.listen.port
    assert env["FT_GATEWAY_HOST"] == "0.0.0.0"


def test_pod_runs_as_non_root_on_a_read_only_root(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # The one writable place is /tmp (the metrics directory of --workers).
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    for path, name in mounts.items():
        if path != "/tmp":
            assert "emptyDir" not in volumes[name]


def test_resources_and_workers_match(container: dict[str, Any]) -> None:
    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    args = container["args"]
    workers = int(args[args.index("--workers") + 1])
    assert workers == int(resources["requests"]["cpu"])


def test_policy_comes_from_the_configmap_and_is_the_shipped_one(
    pod: dict[str, Any], container: dict[str, Any], config: Settings
) -> None:
    policy_map = manifest("policy.yaml")
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    policy_volume = next(
        n for n, v in volumes.items() if v.get("configMap", {}).get("name") == "ft-gateway-policy"
    )
    assert policy_map["metadata"]["name"] == "ft-gateway-policy"
    (file_name,) = policy_map["data"]
    assert config.policy == Path(mounts[policy_volume]) / file_name
    text = policy_map["data"][file_name]
    assert text == POLICY.read_text(), "run scripts/k8s-policy"
    parse_policy_text(text)


def test_config_comes_from_the_configmap_and_is_valid(
    pod: dict[str, Any], container: dict[str, Any], config: Settings
) -> None:
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_volume = next(
        n for n, v in volumes.items() if v.get("configMap", {}).get("name") == "ft-gateway-config"
    )
    args = container["args"]
    assert args[args.index("--config") + 1] == f"{mounts[config_volume]}/config.yaml"
    assert config.listen.metrics_port == port_number(container, "metrics")


def test_the_engines_come_from_the_headless_services_dns_name(config: Settings) -> None:
    service = manifest("engine-service.yaml")
    assert service["spec"]["clusterIP"] == "None"  # one DNS record per engine pod
    dns = config.upstream.dns
    assert dns is not None
    assert dns.name.split(".")[0] == service["metadata"]["name"]
    assert dns.port in {p["port"] for p in service["spec"]["ports"]}
    assert dns.nameserver is None  # the cluster's resolver, from resolv.conf


def test_key_hashes_come_from_the_secret(
    pod: dict[str, Any], container: dict[str, Any], config: Settings
) -> None:
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    keys_volume = next(n for n, v in volumes.items() if "secret" in v)
    example = manifest("keys-secret.example.yaml")
    assert volumes[keys_volume]["secret"]["secretName"] == example["metadata"]["name"]
    (file_name,) = example["stringData"]
    assert config.auth.keys_file == Path(mounts[keys_volume]) / file_name
    keys = read_keys_file(parse_yaml(example["stringData"][file_name], file="example"))
    assert len(keys) >= 1


def test_service_and_autoscaler_point_at_the_deployment(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = manifest("service.yaml")
    assert service["spec"]["selector"].items() <= labels.items()
    targets = {p["name"]: port_number(container, p["targetPort"]) for p in service["spec"]["ports"]}
    assert targets["http"] == Settings().listen.port
    hpa = manifest("hpa.yaml")
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"  # needs the CPU request checked above
    pdb = manifest("pdb.yaml")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]


def test_grace_period_covers_the_drain(pod: dict[str, Any], config: Settings) -> None:
    assert pod["terminationGracePeriodSeconds"] > config.server.drain_timeout + 5


def test_rate_limits_live_in_the_redis_of_the_manifests(config: Settings) -> None:
    # docs/limits.md: the counters shared by the pods, in redis.yaml's Redis.
    service = manifest("redis-service.yaml")
    deployment = manifest("redis.yaml")
    port = service["spec"]["ports"][0]["port"]
    assert config.rate_limits.store == "redis"
    assert config.rate_limits.redis.url == f"redis://{service['metadata']['name']}:{port}/0"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    redis = deployment["spec"]["template"]["spec"]["containers"][0]
    assert redis["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"--save", "--appendonly"} <= set(redis["args"])
