"""What the pages promise about the repository stays true: the README is a front
door naming the two commands and every dependency, the configuration page names
every key, the operating page every metric, and every file, module and test the
pages name exists."""

from __future__ import annotations

import importlib
import re
import tomllib

import pytest
from pydantic import BaseModel

from gateway.routes import ROUTE_NAMES as ROUTES
from gateway.settings import Settings
from tests.docs.markdown import DOCS, PAGES, ROOT, Span, code_spans, split

README = ROOT / "README.md"
# Files the pages name as examples of the reader's own, not of the repository.
EXAMPLE_FILES = {
    "policies/edited.yaml",  # a policy with mistakes, as `check` prints it
    "policies/candidate.yaml",  # what a probe before an upgrade writes
    "policies/candidate.cases.yaml",  # the case file the probe writes beside it
    "gateway/upstream/foo_impl.py",  # the client CONTRIBUTING.md's how-to adds
    "gateway/proxy/embeddings.py",  # the route CONTRIBUTING.md's how-to adds
}
# Files removed since, that the changelog names as history (and no other page may).
REMOVED = {
    "bench/request_cost.py",  # the memory scenario of python -m bench.cost (issue 38)
    "bench/observer_cost.py",  # the observers scenario
    "scripts/observer-cost",  # scripts/bench cost observers
}
_TOP = "gateway|tests|scripts|bench|sampler|refengine|policies|deploy|docs"
# A repository path with a file's extension, or a script: folders are left out,
# since tests/<package>/ and the like name kinds of folder more often than one.
_PATH = re.compile(
    rf"(?<![\w./-])((?:{_TOP})/[\w./-]*?(?:\.(?:py|md|yaml|json|toml)\b|(?<=scripts/)[\w-]+))"
)


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines: move the detail to docs/"


def test_readme_names_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    # .ci/run runs scripts/test: the README's test command and CI's are the same.
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("scripts/demo", "scripts/test"):
        assert f"\n{command}\n" in text, f"README.md shows no '{command}' command line"


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def test_readme_says_why_of_every_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [_requirement_name(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        # "ft-gateway[refengine]": an extra that includes another, no new dependency
        names.extend(_requirement_name(r) for r in extra if not r.startswith(project["name"]))
    section = README.read_text(encoding="utf-8").split("\n## Dependencies\n", 1)
    assert len(section) == 2, "README.md has no Dependencies section"
    rows = [line.lower() for line in section[1].splitlines() if line.startswith("| ")]
    named = {n.strip() for row in rows for n in row.split("|")[1].split(",")}
    missing = sorted({n for n in names if not any(n == w or w.startswith(n + " ") for w in named)})
    assert not missing, f"dependencies without a line in README.md's Dependencies: {missing}"


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out.extend(_keys(kind, f"{prefix}{name}."))
        else:
            out.append(prefix + name)
    return out


def test_configuration_page_names_every_key() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [key for key in _keys(Settings) if f"`{key}`" not in text]
    assert not missing, f"config keys docs/configuration.md does not name: {missing}"


def test_operating_page_names_every_metric() -> None:
    source = "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "gateway" / "observe").glob("*.py"))
    )
    metrics = set(re.findall(r'"(ft_gateway_[a-z_]+)"', source))
    assert len(metrics) > 10
    text = (DOCS / "operating.md").read_text(encoding="utf-8")
    missing = sorted(m for m in metrics if f"`{m}" not in text)
    assert not missing, f"metrics docs/operating.md does not name: {missing}"


def _named_paths() -> list[Span]:
    found = []
    for page in [*PAGES, ROOT / "SECURITY.md"]:
        blocks, prose = split(page)
        texts = [(n, t) for n, t in prose] + [(b.line, b.text) for b in blocks]
        for number, text in texts:
            for m in _PATH.finditer(text):
                found.append(Span(page, number, m[1]))
    return found


PATHS = _named_paths()


def test_no_page_signals_gateways_by_process_name() -> None:
    """pgrep -f matches every user's gateways on a shared host: reload by the pidfile
    (ft-gateway reload)."""
    for page in PAGES:
        if page.name == "CHANGELOG.md":
            continue  # history: it names the command that was removed
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"kill\b[^\n]*pgrep|pkill", text), page


def test_the_pages_name_files() -> None:
    assert len(PATHS) > 50


@pytest.mark.parametrize("span", PATHS, ids=lambda s: f"{s.where}: {s.text}")
def test_named_file_exists(span: Span) -> None:
    path = span.text.split("::")[0]
    if path in EXAMPLE_FILES or (span.where.startswith("CHANGELOG.md:") and path in REMOVED):
        return
    assert (ROOT / path).exists(), (
        f"{span.where}: {path} does not exist (moved? the page must follow it)"
    )


def _test_functions() -> set[str]:
    names: set[str] = set()
    for source in (ROOT / "tests").rglob("*.py"):
        names.update(re.findall(r"^(?:async )?def (test_\w+)", source.read_text(), re.M))
    return names


TESTS = _test_functions()
CITED_TESTS = [
    Span(s.page, s.line, name)
    for page in [*PAGES, ROOT / "SECURITY.md"]
    for s in code_spans(page)
    for name in re.findall(r"(?:^|::)(test_\w+)$", s.text)
]


@pytest.mark.parametrize("span", CITED_TESTS, ids=lambda s: f"{s.where}: {s.text}")
def test_cited_test_function_exists(span: Span) -> None:
    assert span.text in TESTS, f"{span.where}: no test function {span.text} under tests/"


DOTTED = [
    s
    for page in PAGES
    for s in code_spans(page)
    if re.fullmatch(r"gateway(?:\.\w+)+", s.text) and not s.text.endswith(".py")
]


@pytest.mark.parametrize("span", DOTTED, ids=lambda s: f"{s.where}: {s.text}")
def test_dotted_name_exists(span: Span) -> None:
    parts = span.text.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(obj, attribute), f"{span.where}: {span.text} does not exist"
            obj = getattr(obj, attribute)
        return
    pytest.fail(f"{span.where}: no module for {span.text}")


def test_the_policy_page_names_every_route_a_policy_can_name() -> None:
    text = (DOCS / "policy.md").read_text(encoding="utf-8")
    sentence = text[text.index("The routes a policy can name") :].split(". ")[0]
    assert all(f"`{route}`" in sentence for route in ROUTES), sentence
