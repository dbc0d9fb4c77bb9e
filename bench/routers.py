"""The Rust LLM routers as bench contenders: the vLLM router (PyPI ``vllm-router``) and
SMG, the Shepherd Model Gateway (PyPI ``smg``), each from its own virtual environment
(``scripts/router NAME`` installs it once per machine and prints its command).

Each runs as shipped but for what would make it do work the others do not: its
cheapest policy (``round_robin``: one counter, where the default ``cache_aware`` keeps
a prefix tree of every request), its health checks off (SMG: ``--disable-health-check``;
the vLLM router has no such switch, so its periodic check is a day apart), its metrics
listener on a port of the run's own (neither can switch it off), and one worker thread
without a flag: each sizes its runtime by the CPUs it may use, and the harness pins it
to one. Both probe the engine's ``GET /health`` before they route (bench/fake_engine.py
answers it). Their launcher (a Python script that starts the compiled router in its own
process) stays in the process tree, so its memory counts, as the gateway's interpreter
does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.tools import installed


@dataclass(frozen=True)
class Router:
    """One router: its command and the arguments that make it a plain router."""

    name: str
    # The arguments after the command: (host, port, engine URL, metrics port) -> argv.
    arguments: Callable[[str, int, str, int], list[str]]


def _vllm_router(host: str, port: int, upstream: str, metrics: int) -> list[str]:
    return [
        "--host", host, "--port", str(port),
        "--worker-urls", upstream,
        "--policy", "round_robin",
        "--worker-startup-check-interval", "1",
        "--health-check-interval-secs", "86400",
        "--prometheus-host", host, "--prometheus-port", str(metrics),
        "--log-level", "warning",
    ]  # fmt: skip


def _smg(host: str, port: int, upstream: str, metrics: int) -> list[str]:
    return [
        "launch",
        "--host", host, "--port", str(port),
        "--worker-urls", upstream,
        "--policy", "round_robin",
        "--worker-startup-check-interval", "1",
        "--disable-health-check",
        # Pure load balancing: no tokenizer fetched for the model, no load polling
        # (round robin reads no load).
        "--disable-tokenizer-autoload",
        "--disable-load-monitoring",
        "--prometheus-host", host, "--prometheus-port", str(metrics),
        "--log-level", "warn",
    ]  # fmt: skip


ROUTERS = {r.name: r for r in (Router("vllm-router", _vllm_router), Router("smg", _smg))}


def router_binary(name: str) -> str:
    """The router's command, installed by ``scripts/router NAME`` (once per machine)."""
    return installed("router", name)


def router_command(
    name: str, *, host: str, port: int, upstream: str, metrics_port: int, binary: str | None = None
) -> list[str]:
    """The command line of router ``name`` listening on ``host:port`` in front of the
    engine at ``upstream`` (``binary``: its command, by default the installed one)."""
    router = ROUTERS[name]
    return [binary or router_binary(name), *router.arguments(host, port, upstream, metrics_port)]
