"""A probe's result, read back by the probe's tests."""

from __future__ import annotations

from gateway.probe.runner import ProbeResult


def outcomes(result: ProbeResult, route: str) -> dict[str, str]:
    """Each probed field's outcome on ``route``, which was probed without an error."""
    found = result.route(route)
    assert found is not None and found.error is None
    return {v.field: v.outcome for v in found.verdicts}
