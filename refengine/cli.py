"""``python -m refengine``: serve the reference engine."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn

from refengine.modes import PER_BATCH, PER_ROW, UNPATCHED
from refengine.server import DEFAULT_MODEL_NAME, create_app
from refengine.structured.keywords import parse_names
from refengine.structured.options import StructuredOptions
from refengine.structured.schema import SchemaRules
from refengine.vectors import NOOPS

_DESCRIPTION = """\
A reference LLM engine that behaves like ft serve on the wire: OpenAI
/v1/chat/completions, /v1/completions (streaming or not) and /v1/models, with
continuous batching over a small word-trigram model, sampled by the per-row
Philox sampler (seed honoured). Like ft serve, it accepts logprobs (chat),
top_logprobs, logit_bias, n, response_format, tools and unknown fields and
silently ignores them; /v1/completions rejects logprobs. It also serves
/v1/embeddings (ref-embedding-1), /v1/rerank and /rerank (ref-reranker-1),
/tokenize and /detokenize. --structured-outputs and --tools make it honour
response_format and tool calling as an engine with a grammar backend does
(docs/refengine-structured.md), with flags for the ways real engines fall short."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m refengine", description=_DESCRIPTION)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=DEFAULT_MODEL_NAME, help="the served model name")
    modes = parser.add_argument_group(
        "engines that break the seed contract (see refengine/modes.py and docs/sampling.md)"
    )
    seed = modes.add_mutually_exclusive_group()
    seed.add_argument(
        "--unpatched-sampler",
        action="store_const",
        dest="seed_mode",
        const=UNPATCHED,
        default=PER_ROW,
        help="ignore seed: draw the whole batch from one shared generator (ft serve before #693)",
    )
    seed.add_argument(
        "--per-batch-seed",
        action="store_const",
        dest="seed_mode",
        const=PER_BATCH,
        help="one stream per batch, keyed by its first seeded row, each row drawing by its "
        "position (FlashInfer's sampling kernels): a seed replays alone, not under load",
    )
    modes.add_argument(
        "--batch-variant-logits",
        action="store_true",
        help="logits change slightly with the batch size (kernels that are not "
        "batch-invariant): near-ties flip under load, even at temperature 0",
    )
    parser.add_argument("--max-batch", type=int, default=32, help="rows per step at most")
    parser.add_argument(
        "--step-delay-ms", type=float, default=0.0, help="pause after each step (slow streams)"
    )
    cost = parser.add_argument_group(
        "prefill and prefix cache (a model of an engine's KV cache; see refengine/prefixcache.py)"
    )
    cost.add_argument(
        "--prefill-ms-per-token",
        type=float,
        default=0.0,
        help="prefill time per uncached prompt token, one prefill at a time (0: free)",
    )
    cost.add_argument(
        "--prefix-cache-blocks",
        type=int,
        default=0,
        help="prefix cache size in blocks, LRU (0: no cache, no prompt_tokens_details)",
    )
    cost.add_argument("--block-size", type=int, default=16, help="tokens per cache block")
    parser.add_argument(
        "--ignore",
        action="append",
        choices=NOOPS,
        default=[],
        help="embeddings and rerank: accept this field and silently ignore it, as some "
        "engines do (repeatable)",
    )
    _structured_arguments(parser)
    parser.add_argument("--log-level", default="info")
    return parser.parse_args(argv)


def _names(text: str) -> frozenset[str]:
    try:
        return parse_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _structured_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "structured outputs and tools (off: ignored, as ft serve ignores them; see "
        "docs/refengine-structured.md)"
    )
    group.add_argument(
        "--structured-outputs",
        action="store_true",
        help="honour response_format json_object and json_schema: JSON drawn from the "
        "schema with the row's seeded draws",
    )
    group.add_argument(
        "--tools",
        action="store_true",
        help="honour tools, tool_choice and parallel_tool_calls: calls whose arguments "
        "follow the tool's parameters",
    )
    keywords = "comma-separated JSON-Schema keywords, e.g. uniqueItems,maxLength"
    group.add_argument(
        "--drop-keywords",
        type=_names,
        default=frozenset(),
        help=f"answer as if these keywords were absent, as a grammar converter that drops "
        f"them does ({keywords})",
    )
    group.add_argument(
        "--reject-keywords",
        type=_names,
        default=frozenset(),
        help=f"refuse a schema using these with a 400 ({keywords})",
    )
    group.add_argument(
        "--crash-keywords",
        type=_names,
        default=frozenset(),
        help=f"fail on a schema using these with a 500 ({keywords})",
    )
    group.add_argument(
        "--reject-unknown-keywords",
        action="store_true",
        help="refuse a keyword the engine does not know (default: ignore it, as grammar "
        "backends do)",
    )
    group.add_argument(
        "--prose-for-required",
        action="store_true",
        help='tool_choice "required": answer prose, labelled finish_reason tool_calls',
    )
    group.add_argument(
        "--ignore-named-choice",
        action="store_true",
        help="a named tool_choice is taken as auto (llama.cpp's server with the object form)",
    )
    group.add_argument(
        "--ignore-parallel-false",
        action="store_true",
        help="parallel_tool_calls false is ignored: several calls may come back",
    )
    group.add_argument(
        "--ignore-choice-none",
        action="store_true",
        help='tool_choice "none" is taken as auto: calls may come back',
    )
    group.add_argument(
        "--json-whitespace",
        action="store_true",
        help="JSON mode with no message that mentions JSON: whitespace until max_tokens "
        "(what OpenAI's guide warns of)",
    )


def structured_options(args: argparse.Namespace) -> StructuredOptions:
    """The structured-outputs flags as the app's options."""
    return StructuredOptions(
        response_format=args.structured_outputs,
        tools=args.tools,
        schema=SchemaRules(
            drop=args.drop_keywords,
            reject=args.reject_keywords,
            crash=args.crash_keywords,
            reject_unknown=args.reject_unknown_keywords,
        ),
        prose_for_required=args.prose_for_required,
        ignore_named_choice=args.ignore_named_choice,
        ignore_parallel_false=args.ignore_parallel_false,
        ignore_choice_none=args.ignore_choice_none,
        json_whitespace=args.json_whitespace,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    args = parse_args(argv)
    if args.max_batch < 1:
        raise SystemExit("--max-batch must be >= 1")
    if args.prefill_ms_per_token < 0 or args.prefix_cache_blocks < 0 or args.block_size < 1:
        raise SystemExit(
            "--prefill-ms-per-token and --prefix-cache-blocks must be >= 0, --block-size >= 1"
        )
    app = create_app(
        model_name=args.model,
        max_batch=args.max_batch,
        seed_mode=args.seed_mode,
        batch_variant_logits=args.batch_variant_logits,
        step_delay_ms=args.step_delay_ms,
        prefill_ms_per_token=args.prefill_ms_per_token,
        prefix_cache_blocks=args.prefix_cache_blocks,
        block_size=args.block_size,
        ignore=frozenset(args.ignore),
        structured=structured_options(args),
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
