"""The probe of the routes that generate nothing: /v1/embeddings and /v1/rerank.

Each field is judged by what the answer is, not by whether the engine took it:
``dimensions`` by the vector's length, ``encoding_format`` by a base64 string that
decodes to the same floats, a batch by one vector per input in ``index`` order,
token ids by whether the engine's own ids (from its /tokenize) give the text's
vector, ``model`` by whether an unknown name is refused; rerank's ``top_n`` by the
number of results and ``return_documents`` by the documents in them. The rules
written (vector_rules.py) pass what is honoured and refuse the rest with a 400 that
names the field, as for chat.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import Any

from gateway.probe.client import Answer, EngineClient
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    Trial,
    Verdict,
    compact,
    failure,
)
from gateway.routes import EMBEDDINGS, RERANK

TEXT = "The quick brown fox jumps over the lazy dog."
BATCH = [TEXT, "A list in Python is a mutable sequence.", "Rain fell on the old town."]
QUERY = "What is a list in Python?"
DOCUMENTS = [
    "The weather was cold and wet.",
    "A list in Python is a mutable sequence of items.",
    "Dogs are loyal animals.",
    "Python lists grow as items are appended.",
]
NO_SUCH_MODEL = "ft-gateway-probe-no-such-model"
REQUESTS = {EMBEDDINGS: 8, RERANK: 5}  # embeddings: 7, and 8 with llama.cpp's /tokenize
Found = tuple[list[Verdict], str | None]  # the verdicts, or why the route was not measured
_SAME = 1e-5  # float32 rounding, and engines that renormalise in another precision


def _trial(answer: Answer, got: str) -> Trial:
    shown = {k: v for k, v in answer.sent.items() if k not in ("input", "documents", "query")}
    if isinstance(answer.sent.get("input"), list):
        shown["input"] = f"[{len(answer.sent['input'])} items]"
    return Trial(compact(shown, 160), got)


def _vectors(answer: Answer) -> list[tuple[Any, Any]]:
    """(index, embedding) of each member of an embeddings answer's data, as sent."""
    data = answer.body.get("data") if isinstance(answer.body, dict) else None
    if not isinstance(data, list):
        return []
    return [(d.get("index"), d.get("embedding")) for d in data if isinstance(d, dict)]


def _floats(value: Any) -> list[float] | None:
    if isinstance(value, list) and value and all(isinstance(x, int | float) for x in value):
        return [float(x) for x in value]
    return None


def _shape(value: Any) -> str:
    """What an embedding that is not a vector of numbers is, in a few words."""
    if isinstance(value, list) and value and all(isinstance(x, list) for x in value):
        return f"a list of {len(value)} lists, not one vector"
    return "not a list of numbers" if value is not None else "none"


def _decoded(value: Any) -> list[float] | None:
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) % 4:
        return None
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, abs_tol=_SAME) for x, y in zip(a, b, strict=True)
    )


def _judge(name: str, answer: Answer, honoured: bool | None, what: str, got: str) -> Verdict:
    trial = _trial(answer, got)
    failed = failure(name, answer, trial)
    if failed is not None:
        return failed
    if honoured is None:
        return Verdict(name, INCONCLUSIVE, what, (trial,))
    if honoured:
        return Verdict(name, HONOURED, what, (trial,))
    return Verdict(name, IGNORED, f"200 without the effect: {what}", (trial,))


def _model_verdict(client: EngineClient, path: str, body: dict[str, Any]) -> Verdict:
    answer = client.post(path, body | {"model": NO_SUCH_MODEL})
    trial = _trial(answer, f"HTTP {answer.status}" if answer.status else str(answer.error))
    if answer.status is not None and 400 <= answer.status < 500:
        return Verdict(
            "model", HONOURED, f"an unknown name is refused (HTTP {answer.status})", (trial,)
        )
    if answer.ok:
        return Verdict("model", IGNORED, "an unknown model name is served", (trial,))
    return failure("model", answer, trial) or Verdict("model", BROKEN, "no answer", (trial,))


def probe_embeddings(client: EngineClient, *, model: str) -> Found:
    """The verdicts on /v1/embeddings (an error when the plain request fails)."""
    base = {"model": model, "input": TEXT, "encoding_format": "float"}
    plain = client.post(EMBEDDINGS, base, force=True)
    found = _vectors(plain)
    vector = _floats(found[0][1]) if plain.ok and len(found) == 1 else None
    if vector is None:
        why = f"HTTP {plain.status}" if plain.status else f"{plain.error}"
        if plain.ok:  # a 200 whose data is not one vector of numbers (a vector a token?)
            why += f", data[0].embedding: {_shape(found[0][1] if found else None)}"
        return [], f"no embedding: {why}"
    width = len(vector)
    verdicts: list[Verdict] = []

    asked = max(1, min(64, width // 2))
    answer = client.post(EMBEDDINGS, base | {"dimensions": asked})
    got = _floats(next(iter(_vectors(answer)), (0, None))[1])
    size = len(got) if got is not None else None
    verdicts.append(
        _judge(
            "dimensions",
            answer,
            size == asked if size in (asked, width) else None,
            f"asked {asked} of {width}, got a vector of {size}",
            f"{size} floats",
        )
    )

    answer = client.post(EMBEDDINGS, base | {"encoding_format": "base64"})
    value = next(iter(_vectors(answer)), (0, None))[1]
    decoded = _decoded(value)
    if decoded is not None:
        same = _close(decoded, vector)
        what = f"base64 of {len(decoded)} float32" + ("" if same else ", not the float answer")
        verdicts.append(_judge("encoding_format", answer, same or None, what, what))
    else:
        floats = _floats(value)
        what = "floats instead of base64" if floats is not None else "neither base64 nor floats"
        verdicts.append(_judge("encoding_format", answer, False if floats else None, what, what))

    answer = client.post(EMBEDDINGS, base | {"input": BATCH})
    members = _vectors(answer)
    indexes = [i for i, _ in members]
    first = _floats(members[0][1]) if members else None
    honoured = (
        indexes == list(range(len(BATCH)))
        and all(_floats(v) is not None and len(_floats(v) or ()) == width for _, v in members)
        and first is not None
        and _close(first, vector)
    )
    what = f"{len(BATCH)} inputs gave {len(members)} vectors, indexes {indexes}"
    if first is not None and not _close(first, vector):
        what += ", the first not the text's own vector"
    verdicts.append(_judge("input", answer, honoured, what, what))

    verdicts.append(_token_ids(client, model, base, vector))
    verdicts.append(_model_verdict(client, EMBEDDINGS, base))
    return verdicts, None


def _token_ids(
    client: EngineClient, model: str, base: dict[str, Any], vector: list[float]
) -> Verdict:
    ids = _tokens(client.post("/tokenize", {"model": model, "prompt": TEXT}))
    if not ids:
        # llama.cpp's shape: its server answers vLLM's with no tokens. With the special
        # tokens, as the text is embedded.
        ids = _tokens(client.post("/tokenize", {"content": TEXT, "add_special": True}))
    own = bool(ids)
    sent = ids if own else [791, 4062, 14198, 39935]  # OpenAI's cl100k ids of the text's start
    answer = client.post(EMBEDDINGS, base | {"input": sent})
    got = _floats(next(iter(_vectors(answer)), (0, None))[1])
    if not own:
        what = "accepted ids, but the engine has no /tokenize to tell whose ids they are"
        return _judge("token_ids", answer, None, what, "a vector" if got else "no vector")
    same = got is not None and _close(got, vector)
    what = "the engine's own ids (its /tokenize) give " + (
        "the text's vector" if same else "another vector than the text's"
    )
    return _judge("token_ids", answer, same, what, what)


def _tokens(answer: Answer) -> list[int]:
    """The token ids of a /tokenize answer (none where it has no ids)."""
    ids = answer.body.get("tokens") if answer.ok and isinstance(answer.body, dict) else None
    if isinstance(ids, list) and all(type(t) is int for t in ids):
        return ids
    return []


def probe_rerank(client: EngineClient, *, model: str) -> Found:
    """The verdicts on /v1/rerank (an error when the plain request fails)."""
    base = {"model": model, "query": QUERY, "documents": DOCUMENTS}
    plain = client.post(RERANK, base, force=True)
    results = _results(plain)
    if results is None or len(results) != len(DOCUMENTS):
        why = f"HTTP {plain.status}" if plain.status else plain.error
        return [], f"no ranking: {why}"
    verdicts: list[Verdict] = []
    answer = client.post(RERANK, base | {"top_n": 2})
    count = len(_results(answer) or [])
    what = f"top_n 2 of {len(DOCUMENTS)} gave {count} results"
    verdicts.append(_judge("top_n", answer, count == 2, what, what))

    without = client.post(RERANK, base | {"return_documents": False})
    with_ = client.post(RERANK, base | {"return_documents": True})
    shown = [_has_documents(a) for a in (without, with_)]
    what = shown_documents(shown[0], shown[1])
    verdict = _judge("return_documents", without, shown == [False, True], what, what)
    if verdict.outcome == HONOURED:
        verdict = _judge("return_documents", with_, True, what, what)
    verdicts.append(verdict)
    verdicts.append(_model_verdict(client, RERANK, base))
    return verdicts, None


def shown_documents(when_false: bool | None, when_true: bool | None) -> str:
    return f"documents returned: {when_false} when false, {when_true} when true"


def _results(answer: Answer) -> list[Any] | None:
    results = answer.body.get("results") if answer.ok and isinstance(answer.body, dict) else None
    return results if isinstance(results, list) else None


def _has_documents(answer: Answer) -> bool | None:
    results = _results(answer)
    if not results:
        return None
    return all(isinstance(r, dict) and r.get("document") is not None for r in results)


PROBES = {EMBEDDINGS: probe_embeddings, RERANK: probe_rerank}
