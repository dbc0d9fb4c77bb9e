"""The Responses route against the chat route: CPU and latency per request, side by side.

``python -m bench.responses_cost [--rounds N] [--number N] [--client NAME]``

The gateway runs in this process, called as an ASGI app with hand-written
``receive``/``send``, in front of the fast fake engine (bench/fake_engine.py) in its
own process over loopback, as bench/fanout_cost.py does. The same question goes
to ``POST /v1/chat/completions`` (a chat body: relayed as the engine sends it) and
to ``POST /v1/responses`` (a Responses body: policy, translated onto chat
completions, the answer rebuilt as a ``response`` object, each streamed chunk
turned into Responses events), one request at a time, interleaved round by
round so a noisy machine slows both alike: JSON, streamed (64 chunks at once),
and paced streams (64 chunks 1 ms apart, each arriving on its own). No response
store (``store.backend: none``): what is measured is the translation. The table
gives medians of the rounds and the ratios responses / chat.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import orjson

from bench.inprocess import BODY, PACED, Variant, compare_pairs, pair_options

CHAT: dict[str, Any] = BODY
RESPONSES: dict[str, Any] = {
    "model": BODY["model"],
    "input": BODY["messages"][0]["content"],
    "max_output_tokens": BODY["max_tokens"],
}


def variants() -> list[tuple[Variant, Variant]]:
    """Pairs of (the chat request, the same question on the Responses route)."""
    chat, responses = "/v1/chat/completions", "/v1/responses"
    pairs = []
    for kind, extra, headers, share in (
        ("json", {}, [], 1),
        ("stream", {"stream": True}, [], 1),
        ("paced stream", {"stream": True}, PACED, 10),
    ):
        pairs.append(
            (
                Variant(f"{kind} chat", orjson.dumps(CHAT | extra), headers, share, path=chat),
                Variant(
                    f"{kind} responses",
                    orjson.dumps(RESPONSES | extra),
                    headers,
                    share,
                    path=responses,
                ),
            )
        )
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.responses_cost", description=__doc__)
    pair_options(parser)
    compare_pairs(variants(), parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
