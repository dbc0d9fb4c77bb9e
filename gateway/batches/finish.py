"""A batch's last step: its output and error files written from the recorded lines, and
the final Batch object (status, times, counts, usage).

The files' ids are derived from the batch's, so a runner that dies while writing
them and the one that takes over write the same two files, not two more. A
cancelled or expired batch's lines that were never answered go to the error file
with OpenAI's ``batch_cancelled`` or ``batch_expired``.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson

from gateway.batches.objects import unanswered_line
from gateway.batches.store import BatchStore, FileRecord, new_id
from gateway.batches.validate import Line

# The final status a runner's last step gives, and the time field it sets.
FINAL_TIMES = {"completed": "completed_at", "cancelled": "cancelled_at", "expired": "expired_at"}
_UNANSWERED = {
    "cancelled": ("batch_cancelled", "This request was not run: the batch was cancelled."),
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
}


def file_id_of(batch_id: str, kind: str) -> str:
    """The id of a batch's output or error file: the same whoever writes it."""
    return "file-" + hashlib.sha256(f"{batch_id}:{kind}".encode()).hexdigest()[:24]


def usage_of(bodies: list[Any]) -> dict[str, Any]:
    """The Batch's ``usage``: the answers' tokens added up."""
    total = {"input": 0, "output": 0, "total": 0, "cached": 0, "reasoning": 0}
    for body in bodies:
        usage = body.get("usage") if isinstance(body, dict) else None
        if not isinstance(usage, dict):
            continue
        prompt = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
        completion = usage.get("completion_tokens", usage.get("output_tokens")) or 0
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        out_details = (
            usage.get("completion_tokens_details") or usage.get("output_tokens_details") or {}
        )
        total["input"] += int(prompt)
        total["output"] += int(completion)
        total["total"] += int(usage.get("total_tokens") or prompt + completion)
        total["cached"] += int(details.get("cached_tokens") or 0)
        total["reasoning"] += int(out_details.get("reasoning_tokens") or 0)
    return {
        "input_tokens": total["input"],
        "input_tokens_details": {"cached_tokens": total["cached"]},
        "output_tokens": total["output"],
        "output_tokens_details": {"reasoning_tokens": total["reasoning"]},
        "total_tokens": total["total"],
    }


async def finish_batch(
    store: BatchStore, doc: dict[str, Any], status: str, *, lines: list[Line], file_ttl: float
) -> dict[str, Any] | None:
    """Write ``doc``'s files from its recorded lines and end it as ``status`` (``lines``:
    the batch's requests, for those a cancelled or expired batch never answered)."""
    batch = doc["batch"]
    batch_id = batch["id"]
    results = await store.results(batch_id)
    answered = {number for number, _, _ in results}
    ok = [data for _, failed, data in results if not failed]
    bad = [data for _, failed, data in results if failed]
    if status in _UNANSWERED:
        code, message = _UNANSWERED[status]
        bad += [
            unanswered_line(new_id("batch_req_"), line.custom_id, code, message)
            for line in lines
            if line.number not in answered
        ]
    now = int(time.time())
    ttl = (doc.get("output_expires_after") or {}).get("seconds") or file_ttl
    ids: dict[str, str | None] = {"output": None, "error": None}
    for kind, data in (("output", ok), ("error", bad)):
        if not data:
            continue
        content = b"\n".join(data) + b"\n"
        record = FileRecord(
            id=file_id_of(batch_id, kind),
            owner=doc["owner"],
            filename=f"{batch_id}_{kind}.jsonl",
            purpose="batch_output",
            bytes=len(content),
            created_at=now,
            expires_at=now + int(ttl),
        )
        await store.put_file(record, content)
        ids[kind] = record.id
    usage = usage_of([orjson.loads(data)["response"]["body"] for data in ok])
    total = batch["request_counts"]["total"] or len(lines)

    def end(current: dict[str, Any]) -> dict[str, Any]:
        b = current["batch"]
        b["status"] = status
        b[FINAL_TIMES[status]] = now
        b["output_file_id"] = ids["output"]
        b["error_file_id"] = ids["error"]
        b["request_counts"] = {"total": total, "completed": len(ok), "failed": len(bad)}
        b["usage"] = usage
        return current

    ended = await store.update_batch(batch_id, end)
    await store.drop_results(batch_id)
    return ended
