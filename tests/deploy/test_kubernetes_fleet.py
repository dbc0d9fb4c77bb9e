"""deploy/kubernetes/fleet: the base's gateway in front of two engine deployments, each
behind its own headless Service; the overlay's config is a valid fleet whose deployments
find their replicas through those Services."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gateway.deployments import fleet_problems
from gateway.settings import Settings, load_settings
from tests.support.paths import ROOT

FLEET = ROOT / "deploy" / "kubernetes" / "fleet"


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FLEET / name).read_text()) if d is not None]


def fleet_config(tmp_path: Path) -> Settings:
    (configmap,) = documents("config.yaml")
    base = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "config.yaml").read_text())
    # A patch of the base's ConfigMap: the same object, its config replaced.
    assert (configmap["kind"], configmap["metadata"]["name"]) == (
        base["kind"],
        base["metadata"]["name"],
    )
    path = tmp_path / "config.yaml"
    path.write_text(configmap["data"]["config.yaml"])
    return load_settings(path, environ={})


def test_the_overlay_lists_its_files_over_the_base() -> None:
    (kustomization,) = documents("kustomization.yaml")
    assert kustomization["resources"] == ["..", "engine-services.yaml"]
    assert kustomization["patches"] == [{"path": "config.yaml"}]


def test_each_deployment_finds_its_replicas_through_its_headless_service(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path)
    assert fleet_problems(config.deployments) == []
    services = {s["metadata"]["name"]: s for s in documents("engine-services.yaml")}
    assert len(config.deployments) == len(services) == 2
    for deployment in config.deployments:
        dns = deployment.upstream.dns
        assert dns is not None
        service = services[dns.name.split(".")[0]]
        assert service["spec"]["clusterIP"] == "None"  # one DNS record per engine pod
        assert dns.port in {p["port"] for p in service["spec"]["ports"]}
        assert service["spec"]["selector"] == service["metadata"]["labels"]
    assert set(config.rate_limits.models) <= {m for d in config.deployments for m in d.models}
    assert (config.store.backend, config.store.url) == ("redis", "redis://ft-gateway-redis:6379/0")
