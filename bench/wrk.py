"""Closed-loop HTTP load with wrk: POST a chat request, report rate, latency and errors.

wrk is C and costs a few microseconds per request, so it is never the
bottleneck. Its Lua ``done`` hook prints one JSON line, which is what we parse,
rather than wrk's human-readable summary.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

_MARK = "WRKJSON "

_SCRIPT = """\
wrk.method = "POST"
wrk.body = [==[%(body)s]==]
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '%(mark)s{"requests":%%d,"duration_us":%%d,"bytes":%%d,'
    .. '"errors":{"connect":%%d,"read":%%d,"write":%%d,"status":%%d,"timeout":%%d},'
    .. '"p50_us":%%d,"p99_us":%%d,"mean_us":%%.1f,"max_us":%%d}\\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean, latency.max))
end
"""


@dataclass(frozen=True)
class WrkResult:
    """One wrk run: completed requests, their rate, latency percentiles, errors."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int

    @property
    def rps(self) -> float:
        """Completed requests per second (streams count when fully received)."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def lua_script(body: bytes) -> str:
    """The wrk script that POSTs ``body`` and prints a JSON summary line."""
    return _SCRIPT % {"body": body.decode(), "mark": _MARK}


def parse_output(stdout: str) -> WrkResult:
    """Read the JSON line the script's ``done`` hook printed."""
    for line in stdout.splitlines():
        if line.startswith(_MARK):
            data = json.loads(line[len(_MARK) :])
            return WrkResult(
                requests=int(data["requests"]),
                seconds=data["duration_us"] / 1e6,
                p50_ms=data["p50_us"] / 1000.0,
                p99_ms=data["p99_us"] / 1000.0,
                errors=sum(int(v) for v in data["errors"].values()),
            )
    raise ValueError("no wrk summary in output:\n" + stdout[-2000:])


def run_wrk(
    url: str,
    *,
    script: Path,
    concurrency: int,
    seconds: float,
    cpu: int | None = None,
    timeout_s: int = 30,
) -> WrkResult:
    """Run one wrk thread with ``concurrency`` connections for ``seconds``."""
    command = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={timeout_s}s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=seconds + timeout_s + 30
    )
    return parse_output(done.stdout)
