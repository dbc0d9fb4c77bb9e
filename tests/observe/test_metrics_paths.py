"""Decisions inside messages are counted by place, whatever the index, within the cap."""

from __future__ import annotations

from gateway.observe.exchange import Exchange
from gateway.observe.metrics import MAX_FIELDS, OTHER, Metrics
from gateway.policy.engine import Outcome
from tests.support.bodies import CHAT
from tests.support.metrics import Scrape

DECISIONS = "ft_gateway_policy_decisions_total"


def _finish(metrics: Metrics, *outcomes: Outcome) -> None:
    exchange = Exchange("POST", CHAT, CHAT, "id", status=400)
    exchange.outcomes = list(outcomes)
    metrics.started(exchange)
    metrics.finished(exchange)


def test_paths_are_counted_without_their_indexes() -> None:
    metrics = Metrics()
    for i in range(50):
        _finish(metrics, Outcome(f"messages[{i}].content[{i % 3}].type", "rejected"))
    _finish(metrics, Outcome("messages[7].role", "renamed"), Outcome("logprobs", "rejected"))
    scrape = Scrape(metrics.render().decode())
    assert scrape(DECISIONS, route=CHAT, field="messages[].content[].type", action="rejected") == 50
    assert scrape(DECISIONS, route=CHAT, field="messages[].role", action="renamed") == 1
    assert scrape(DECISIONS, route=CHAT, field="logprobs", action="rejected") == 1
    fields = {dict(labels)["field"] for labels in scrape.labelled(DECISIONS)}
    assert fields == {"messages[].content[].type", "messages[].role", "logprobs"}


def test_the_cap_holds_for_paths_too() -> None:
    metrics = Metrics()
    for i in range(MAX_FIELDS + 20):
        _finish(metrics, Outcome(f"messages[0].k{i}", "rejected"))
    scrape = Scrape(metrics.render().decode())
    fields = {dict(labels)["field"] for labels in scrape.labelled(DECISIONS)}
    assert len(fields) == MAX_FIELDS + 1 and OTHER in fields
    assert scrape(DECISIONS, route=CHAT, field=OTHER, action="rejected") == 20
