"""A reference engine that behaves like ft serve on the wire.

Run ``python -m refengine --host H --port P [--model NAME] [--unpatched-sampler]
[--max-batch N] [--step-delay-ms MS]``. It serves POST /v1/chat/completions,
POST /v1/completions (JSON or SSE, ``stream_options.include_usage``) and
GET /v1/models, generating text with a word-trigram model built at start-up from
CPython's pydoc topics, continuously batched and sampled by ``sampler.sample``
with per-row (seed, step). Chat prompts use a Qwen3-style template;
``chat_template_kwargs.enable_thinking`` (default true) makes the reply start
with a short ``<think>...</think>`` block.

Like ft serve, it honours max_tokens (not max_completion_tokens), temperature,
top_p, top_k, min_p, the presence/frequency/repetition penalties, stop and seed,
and it silently ignores logprobs and top_logprobs (chat), logit_bias, n,
response_format and unknown fields; /v1/completions rejects logprobs with 400.
``--unpatched-sampler`` ignores seed, as ft serve did before issue #693.
"""

from refengine.server import create_app

__all__ = ["create_app"]
