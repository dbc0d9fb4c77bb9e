"""Case files for ``ft-gateway test``: request bodies with the verdict a policy must give.

    version: 1
    cases:
      - name: logprobs is refused             # shown when the case fails
        route: /v1/chat/completions           # optional: guessed from the body as explain does
        profile: batch                        # optional: the API key's profile
        model: Qwen3.8-Flash-Next             # optional: sets the body's "model"
        body: {model: m, messages: [...], logprobs: true}
        expect: {refused: {param: logprobs, code: unsupported_parameter}}
      - body: {...}
        expect: unchanged                     # forwarded as the client sent it
      - body: {...}
        expect: {changed: {...}}              # forwarded as this body
        fanout: 3                             # optional: sent this many times
        reported: [{field: top_k, code: integer_above_max_value}]  # optional

Reading reports every problem with its file and line, as policy files do;
``render_cases`` writes the same format (the probe writes one beside its policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from gateway.routes import ROUTE_NAMES as ROUTES
from gateway.yamlsource import Problem, SourceError, YamlDocument, load_yaml

UNCHANGED = "unchanged"
CHANGED = "changed"
REFUSED = "refused"
_CASE_KEYS = {"name", "route", "profile", "model", "body", "expect", "fanout", "reported"}


@dataclass(frozen=True)
class Expected:
    """A case's verdict: unchanged, changed (to ``body``), or refused (``param``, ``code``)."""

    verdict: str
    body: dict[str, Any] | None = None
    param: str | None = None
    code: str | None = None

    def as_data(self) -> Any:
        if self.verdict == UNCHANGED:
            return UNCHANGED
        if self.verdict == CHANGED:
            return {CHANGED: self.body}
        return {REFUSED: {"param": self.param, "code": self.code}}

    def __str__(self) -> str:
        if self.verdict == REFUSED:
            return f"refused on '{self.param}' with {self.code}"
        return "forwarded unchanged" if self.verdict == UNCHANGED else "forwarded changed"


@dataclass
class Case:
    """One request and the verdict the policy must give it."""

    body: dict[str, Any]
    expect: Expected
    name: str = ""
    route: str | None = None
    profile: str | None = None
    model: str | None = None
    fanout: int | None = None
    reported: list[tuple[str, str]] | None = None
    line: int = 0  # where it is in its file

    def request(self) -> dict[str, Any]:
        """The body as sent: with ``model`` set when the case names one."""
        return self.body if self.model is None else {**self.body, "model": self.model}

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name} if self.name else {}
        for key in ("route", "profile", "model"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        data["body"] = self.body
        data["expect"] = self.expect.as_data()
        if self.fanout is not None:
            data["fanout"] = self.fanout
        if self.reported is not None:
            data["reported"] = [{"field": f, "code": c} for f, c in self.reported]
        return data


@dataclass
class CaseFile:
    """The cases of one file."""

    file: str
    cases: list[Case] = field(default_factory=list)


def _expected(doc: YamlDocument, at: tuple[Any, ...], value: Any) -> Expected | Problem:
    if value == UNCHANGED:
        return Expected(UNCHANGED)
    if isinstance(value, dict) and len(value) == 1:
        ((kind, detail),) = value.items()
        if kind == CHANGED and isinstance(detail, dict):
            return Expected(CHANGED, body=detail)
        if (
            kind == REFUSED
            and isinstance(detail, dict)
            and set(detail) == {"param", "code"}
            and all(isinstance(v, str) for v in detail.values())
        ):
            return Expected(REFUSED, param=detail["param"], code=detail["code"])
    return doc.problem(
        at,
        "expect must be 'unchanged', {changed: BODY} or {refused: {param: P, code: C}}",
    )


def _case(doc: YamlDocument, index: int, data: Any, problems: list[Problem]) -> Case | None:
    at: tuple[Any, ...] = ("cases", index)
    if not isinstance(data, dict):
        problems.append(doc.problem(at, "a case must be a mapping"))
        return None
    found = len(problems)
    for key in data:
        if key not in _CASE_KEYS:
            problems.append(doc.problem((*at, key), f"unknown key '{key}'"))
    body = data.get("body")
    if not isinstance(body, dict):
        problems.append(doc.problem((*at, "body"), "body must be a mapping (the request body)"))
    expect = _expected(doc, (*at, "expect"), data.get("expect"))
    if isinstance(expect, Problem):
        problems.append(expect)
    route = data.get("route")
    if route is not None and route not in ROUTES:
        problems.append(doc.problem((*at, "route"), f"route must be one of {', '.join(ROUTES)}"))
    for key in ("name", "profile", "model"):
        if data.get(key) is not None and not isinstance(data[key], str):
            problems.append(doc.problem((*at, key), f"{key} must be a string"))
    fanout = data.get("fanout")
    if fanout is not None and (type(fanout) is not int or fanout < 1):
        problems.append(doc.problem((*at, "fanout"), "fanout must be a positive integer"))
    reported = data.get("reported")
    pairs: list[tuple[str, str]] | None = None
    if reported is not None:
        if isinstance(reported, list) and all(
            isinstance(r, dict) and set(r) == {"field", "code"} for r in reported
        ):
            pairs = [(str(r["field"]), str(r["code"])) for r in reported]
        else:
            problems.append(
                doc.problem((*at, "reported"), "reported must be a list of {field: F, code: C}")
            )
    if len(problems) > found or not isinstance(body, dict) or isinstance(expect, Problem):
        return None
    return Case(
        body=body,
        expect=expect,
        name=data.get("name") or "",
        route=route,
        profile=data.get("profile"),
        model=data.get("model"),
        fanout=fanout,
        reported=pairs,
        line=doc.line_of(at),
    )


def read_cases(doc: YamlDocument) -> CaseFile:
    """The cases of a parsed case file; SourceError lists every problem."""
    problems: list[Problem] = []
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise SourceError([doc.problem((), "a case file is a mapping with a list 'cases'")])
    for key in data:
        if key not in ("version", "description", "cases"):
            problems.append(doc.problem((key,), f"unknown key '{key}'"))
    if data.get("version", 1) != 1:
        problems.append(doc.problem(("version",), "version must be 1"))
    cases = [_case(doc, i, c, problems) for i, c in enumerate(data["cases"])]
    if problems:
        raise SourceError(problems)
    return CaseFile(doc.file, [c for c in cases if c is not None])


def load_cases(path: str) -> CaseFile:
    """Read and check a case file; SourceError for anything wrong."""
    return read_cases(load_yaml(path))


def render_cases(cases: list[Case], *, description: str | None = None) -> str:
    """A case file holding ``cases`` (YAML)."""
    data: dict[str, Any] = {"version": 1}
    if description:
        data["description"] = description
    data["cases"] = [c.as_data() for c in cases]
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
        default_flow_style=None,
    )


class _Dumper(yaml.SafeDumper):
    """Each case written out in full: no anchors shared between cases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
