"""The Dockerfile, its lock and the Kubernetes manifests agree (no build: scripts/image
builds the image and smoke-tests it, minutes, outside the default suite).

The Dockerfile is read instruction by instruction; the manifests with PyPI's YAML.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import gateway
from gateway.settings import Settings, load_settings
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"
IMAGE = ROOT / "deploy" / "image"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) for each instruction, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each the instructions from its FROM on."""
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions((ROOT / "Dockerfile").read_text()):
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def final() -> list[tuple[str, str]]:
    return stages()[-1]


def values(stage: list[tuple[str, str]], word: str) -> list[str]:
    return [rest for name, rest in stage if name == word]


def option(command: str, name: str) -> str:
    words = shlex.split(command)
    return words[words.index(name) + 1]


@pytest.fixture(scope="module")
def pod() -> dict[str, Any]:
    deployment = yaml.safe_load((DEPLOY / "deployment.yaml").read_text())
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def image_config(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """deploy/image/config.yaml with the image's ENV, as the container loads it."""
    env = dict(
        (pair.split("=", 1) for pair in shlex.split(" ".join(values(final(), "ENV")))),
    )
    return load_settings(IMAGE / "config.yaml", environ=env)


def test_the_image_and_the_pods_share_one_uid_and_gid(pod: dict[str, Any]) -> None:
    run = " ".join(values(final(), "RUN"))
    useradd = run[run.index("useradd") :]
    groupadd = run[run.index("groupadd") :]
    uid, gid = option(useradd, "--uid"), option(useradd, "--gid")
    assert option(groupadd, "--gid") == gid
    assert values(final(), "USER") == [f"{uid}:{gid}"]
    context = pod["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (
        int(uid),
        int(gid),
        int(gid),
    )
    # The keys Secret is mounted 0440: readable through the group only.
    keys = next(v for v in pod["volumes"] if "secret" in v)
    assert keys["secret"]["defaultMode"] == 0o440


def test_the_api_and_metrics_ports_are_exposed(pod: dict[str, Any], image_config: Settings) -> None:
    exposed = {int(port) for rest in values(final(), "EXPOSE") for port in rest.split()}
    listen = image_config.listen
    assert listen.metrics_port is not None
    # serve's two ports, and ft-gateway extproc's gRPC one (the chart's extproc mode).
    assert exposed == {listen.port, listen.metrics_port, image_config.extproc.port}
    assert image_config.extproc.host == "0.0.0.0"
    (container,) = pod["containers"]
    assert {p["containerPort"] for p in container["ports"]} == exposed - {image_config.extproc.port}
    healthcheck = " ".join(values(final(), "HEALTHCHECK"))
    assert "/healthz" in healthcheck and "FT_GATEWAY_PORT" in healthcheck


def test_the_image_config_is_the_default_command_and_names_the_shipped_policy(
    image_config: Settings,
) -> None:
    copies = {shlex.split(rest)[-1]: shlex.split(rest)[0] for rest in values(final(), "COPY")}
    assert copies[str(image_config.policy)] == "policies/ft-serve.yaml"
    env = " ".join(values(final(), "ENV"))
    config = re.search(r"FT_GATEWAY_CONFIG=(\S+)", env)
    assert config is not None and copies[config.group(1)] == "deploy/image/config.yaml"


def test_the_final_stage_holds_no_sources(pod: dict[str, Any]) -> None:
    sources = {"gateway", "sampler", "refengine", "pyproject.toml", "."}
    for rest in values(final(), "COPY"):
        words = shlex.split(rest)
        if not words[0].startswith("--from="):
            assert not sources & {w.rstrip("/") for w in words[:-1]}, rest
    (workdir,) = values(final(), "WORKDIR")
    assert workdir not in {"/", "/app"}
    # The dependencies are installed before the sources are copied (a layer kept by a
    # code change), from the lock with hashes.
    words = [name + " " + rest for stage in stages()[:-1] for name, rest in stage]
    lock = next(i for i, w in enumerate(words) if "--require-hashes" in w)
    first_source = next(i for i, w in enumerate(words) if w.startswith("COPY gateway"))
    assert lock < first_source


def test_the_manifests_name_the_image_as_a_registry_would(pod: dict[str, Any]) -> None:
    (container,) = pod["containers"]
    reference = container["image"]
    registry, _, rest = reference.partition("/")
    name, _, tag = rest.rpartition(":")
    assert "." in registry and name == "ft-gateway", reference
    assert tag == gateway.__version__, "the manifests name the release they run"
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    (entry,) = kustomization["images"]
    assert (entry["name"], entry["newTag"]) == (f"{registry}/{name}", tag)


def test_the_grace_period_outlasts_the_images_drain(
    pod: dict[str, Any], image_config: Settings
) -> None:
    assert values(final(), "STOPSIGNAL") == ["SIGTERM"]
    assert pod["terminationGracePeriodSeconds"] > image_config.server.drain_timeout


def locked(name: str) -> dict[str, tuple[str, int]]:
    """name -> (pinned version, number of hashes) of a lock file of deploy/image."""
    text = re.sub(r"\\\n", " ", (IMAGE / name).read_text())
    pins: dict[str, tuple[str, int]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line.split(" --hash")[0].strip())
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(requirement.name)] = (spec.version, line.count("--hash="))
    return pins


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked("requirements.lock")
    environment = {key: str(value) for key, value in default_environment().items()}
    environment["sys_platform"] = "linux"  # the image's, wherever the test runs
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue
        version, hashes = pins.get(canonicalize_name(requirement.name), ("", 0))
        assert version and requirement.specifier.contains(version), f"{line}: run scripts/lock"
    assert all(hashes >= 1 for _, hashes in pins.values())
    # numpy is the reference engine's (the refengine extra), not the gateway's.
    assert "numpy" not in pins
    assert not any("numpy" in line for line in project["dependencies"])


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore  # everything else stays out (.venv, .git, tests)
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for stage in stages():
        for rest in values(stage, "COPY"):
            words = shlex.split(rest)
            if not words[0].startswith("--from="):
                for source in words[:-1]:
                    assert source.rstrip("/") in kept, source
                    assert (ROOT / source).exists(), source


def test_the_build_lock_pins_the_build_backend() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    pins = locked("build.lock")
    for line in requires:
        requirement = Requirement(line)
        version, hashes = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version) and hashes >= 1, "run scripts/lock"
