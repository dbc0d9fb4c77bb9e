"""Presence, frequency and repetition penalties, applied to one row's logits in place."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from refengine.params import SamplingParams


def apply_penalties(
    logits: npt.NDArray[np.float32],
    params: SamplingParams,
    *,
    prompt: Sequence[int],
    generated: Sequence[int],
) -> None:
    """OpenAI presence/frequency penalties over the output; vLLM's repetition penalty."""
    if params.repetition_penalty != 1.0:
        # vLLM semantics: over prompt and output tokens, shrink positive logits and
        # push negative ones further down.
        seen = np.unique(np.asarray([*prompt, *generated], dtype=np.int64))
        values = logits[seen]
        logits[seen] = np.where(
            values > 0, values / params.repetition_penalty, values * params.repetition_penalty
        )
    if generated and (params.presence_penalty or params.frequency_penalty):
        counts = np.bincount(np.asarray(generated, dtype=np.int64), minlength=logits.size)
        logits -= (params.frequency_penalty * counts).astype(np.float32)
        logits -= np.float32(params.presence_penalty) * (counts > 0)
