"""The rules a probe of /v1/embeddings or /v1/rerank calls for (vectors.py measures):
what is honoured passes with its checks, the rest is refused with a 400 naming it,
each rule with its verdict and evidence in a comment, as for chat."""

from __future__ import annotations

from typing import Any

from gateway.probe.vectors import shown_documents
from gateway.probe.verdict import HONOURED, IGNORED, REFUSED_BECAUSE, Verdict, probed_note
from gateway.probe.yamltext import comment, entry_lines
from gateway.routes import EMBEDDINGS, RERANK, RERANK_BARE


def _rule(verdict: Verdict | None, passed: dict[str, Any], **refused: Any) -> dict[str, Any]:
    if verdict is not None and verdict.outcome == HONOURED:
        return {"action": "pass", **passed}
    rule = {"action": "reject", **{k: v for k, v in passed.items() if k == "type"}, **refused}
    return rule | {"reason": REFUSED_BECAUSE.get(verdict.outcome, "") if verdict else "Not probed."}


def _note(name: str, verdict: Verdict | None, day: str) -> str:
    return f"{name}: not probed" if verdict is None else probed_note(name, verdict, day)


class _Verdicts:
    def __init__(self, verdicts: list[Verdict]) -> None:
        self.verdicts = verdicts

    def verdict(self, name: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.field == name), None)


def route_lines(path: str, verdicts: list[Verdict], model: str, day: str) -> list[str]:
    """The rules the verdicts on an embeddings or rerank route call for (rerank's at
    both of its paths)."""
    route = _Verdicts(verdicts)
    if path == EMBEDDINGS:
        return _embeddings_lines(route, model, day)
    lines: list[str] = []
    for each in (RERANK, RERANK_BARE):
        lines += _rerank_lines(route, each, model, day)
    return lines


def _model_rule(route: _Verdicts, model: str, day: str, indent: str) -> list[str]:
    verdict = route.verdict("model")
    rule: dict[str, Any] = {"action": "pass", "type": "string", "required": True}
    note = _note("model", verdict, day)
    if verdict is None or verdict.outcome != HONOURED:
        rule["enum"] = [model]  # the engine would serve any name as this one
        note += "; only the probed name is let through"
    return comment(note, indent) + entry_lines("model", rule, indent)


def _embeddings_lines(route: _Verdicts, model: str, day: str) -> list[str]:
    indent = "      "
    lines = [f"  {EMBEDDINGS}:", "    fields:"]
    lines += _model_rule(route, model, day, indent)
    batch = route.verdict("input")
    ids = route.verdict("token_ids")
    batched = batch is not None and batch.outcome == HONOURED
    item = {"type": ["string", "integer", "array"], "nullable": False, "min_length": 1}
    item |= {"minimum": 0, "min_items": 1, "max_items": 2048}
    item["items"] = {"type": "integer", "nullable": False, "minimum": 0}
    own_ids = ids is not None and ids.outcome == HONOURED
    input_rule: dict[str, Any] = {
        "action": "pass",
        "type": ["string", "array"] if batched or own_ids else "string",
        "required": True,
        "min_length": 1,
    }
    if batched:
        input_rule |= {"min_items": 1, "max_items": 2048, "items": item}
    elif own_ids:  # one input: a text, or the engine's ids of one (a batch: input[0], 400)
        input_rule |= {"min_items": 1, "max_items": 2048, "items": item["items"]}
    if own_ids:
        input_rule["token_ids"] = {"action": "pass"}
    else:
        input_rule["token_ids"] = {
            "action": "reject",
            "reason": (
                "Token ids are engine-specific: send the text (LangChain's "
                "OpenAIEmbeddings sends ids unless given check_embedding_ctx_length=False)."
            ),
        }
    lines += comment(_note("input (a batch)", batch, day), indent)
    lines += comment(_note("input (token ids)", ids, day), indent)
    lines += entry_lines("input", input_rule, indent)
    encoding = route.verdict("encoding_format")
    lines += comment(_note("encoding_format", encoding, day), indent)
    if encoding is None or encoding.outcome != HONOURED:
        lines += comment(
            "openai-python asks for base64 unless told otherwise: its callers must set "
            'encoding_format="float" here.',
            indent,
        )
    lines += entry_lines(
        "encoding_format",
        _rule(encoding, {"type": "string", "enum": ["float", "base64"]}, neutral=["float"]),
        indent,
    )
    dimensions = route.verdict("dimensions")
    lines += comment(_note("dimensions", dimensions, day), indent)
    lines += entry_lines("dimensions", _rule(dimensions, {"type": "integer", "minimum": 1}), indent)
    lines += comment("Bookkeeping: removed before forwarding.", indent)
    lines += entry_lines("user", {"action": "strip"}, indent)
    return lines + [""]


def _rerank_lines(route: _Verdicts, path: str, model: str, day: str) -> list[str]:
    indent = "      "
    lines = [f"  {path}:", "    fields:"]
    lines += _model_rule(route, model, day, indent)
    lines += entry_lines(
        "query", {"action": "pass", "type": "string", "required": True, "min_length": 1}, indent
    )
    documents = {"action": "pass", "type": "array", "required": True, "min_items": 1}
    documents["items"] = {"type": ["string", "object"], "nullable": False}
    lines += entry_lines("documents", documents, indent)
    top_n = route.verdict("top_n")
    lines += comment(_note("top_n", top_n, day), indent)
    lines += entry_lines("top_n", _rule(top_n, {"type": "integer", "minimum": 1}), indent)
    shown = route.verdict("return_documents")
    lines += comment(_note("return_documents", shown, day), indent)
    rule = _rule(shown, {"type": "boolean"})
    if shown is not None and shown.outcome == IGNORED:
        # What the engine does whatever is asked is the one value that is no lie.
        for always in (True, False):
            if shown.summary.endswith(shown_documents(always, always)):
                rule["neutral"] = [always]
    lines += entry_lines("return_documents", rule, indent)
    return lines + [""]
