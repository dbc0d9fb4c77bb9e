"""The answer checks on the proxy's side: a verdict recorded, and a stream held at its end.

``judge`` records what the checks (gateway/schemas/answers.py) found on the call's
record: every violation on ``record.answers`` (metrics count them, the access log
and the span show them), a reported one also as a report-only refusal
(``record.report``), and it gives back the first enforced one, which the route raises:
before the answer starts, a 502 in OpenAI's shape; in a stream, the error event that
ends it (openai.py's CheckedChatStream, responses/route.py). No retry: another sample
of the engine is not what a seeded request asked for.
"""

from __future__ import annotations

from gateway.errors import AnswerViolation
from gateway.observe.exchange import Exchange
from gateway.policy.walk import REPORTED, Outcome, Report


def judge(record: Exchange, found: list[AnswerViolation]) -> AnswerViolation | None:
    """Record ``found`` on ``record``; the first enforced violation (to raise), if any."""
    if not found:
        return None
    record.answers = (*record.answers, *found)
    reported = [v for v in found if not v.enforced]
    if reported:
        fields = tuple(Outcome(v.param or "", REPORTED, v.code or "") for v in reported)
        report = record.report
        record.report = (
            Report(reported[0], fields)
            if report is None
            else Report(report.error, (*report.fields, *fields))
        )
    return next((v for v in found if v.enforced), None)


def enforce(record: Exchange, found: list[AnswerViolation]) -> None:
    """Record ``found`` on ``record`` and raise the first enforced violation (a whole
    answer's: before the answer starts, the client's 502)."""
    enforced = judge(record, found)
    if enforced is not None:
        raise enforced
