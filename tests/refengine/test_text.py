"""The reference engine's text side: tokenizer, model, template, stop strings, penalties."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from refengine.model import default_model
from refengine.params import SamplingParams
from refengine.penalties import apply_penalties
from refengine.stops import StopScanner
from refengine.template import render_chat
from refengine.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return default_model().tokenizer


def test_vocabulary_has_thousands_of_tokens(tokenizer: Tokenizer) -> None:
    assert 2000 < tokenizer.vocab_size < 20000
    assert tokenizer.tokens[tokenizer.eos_id] == "<|endoftext|>"


@pytest.mark.parametrize(
    "text",
    [
        "The list is empty.",
        "If the object (a class) defines it, then the method is called; otherwise not.",
        "x = 1",
    ],
)
def test_decode_inverts_encode_on_plain_text(tokenizer: Tokenizer, text: str) -> None:
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text.replace(" = ", " ")  # "=" is not a token


def test_unknown_words_become_unk(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("the zzzqqxx")
    assert tokenizer.tokens[ids[1]] == "<|unk|>"
    assert tokenizer.decode(ids) == "the"


def test_pieces_concatenate_to_the_decoded_text(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("<think>the list (sorted).</think>A new list, or an error!")
    pieces = [tokenizer.piece(ids[i - 1] if i else None, t) for i, t in enumerate(ids)]
    assert "".join(pieces) == tokenizer.decode(ids)
    assert (
        tokenizer.decode(ids) == "<think>\nthe list (sorted).\n</think>\n\nA new list, or an error!"
    )


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [
        (
            True,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n",
        ),
        (
            False,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n",
        ),
    ],
)
def test_chat_template(thinking: bool, expected: str) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
    ]
    assert render_chat(messages, enable_thinking=thinking) == expected


def test_a_rows_logits_depend_on_its_own_context_only() -> None:
    model = default_model()
    tok = model.tokenizer
    contexts = [tok.encode("the list"), tok.encode("an object"), tok.encode("(")]
    caches = [model.prompt_cache(tok.encode(p)) for p in ("cat", "sorted list", "")]
    together = model.logits(contexts, caches)
    for i in range(3):
        assert np.array_equal(together[i], model.logits([contexts[i]], [caches[i]])[0])
    assert together.dtype == np.float32
    assert np.isfinite(together).sum(axis=1).min() > 1000
    assert not np.array_equal(together[0], together[1])


@pytest.mark.parametrize(
    ("stops", "pieces", "sent", "stopped"),
    [
        ((), ["a", " b"], ["a", " b"], False),
        (("END",), ["a", " E", "N", "D more"], ["a", " ", "", ""], True),
        (("END",), ["a", " E", "N", "o"], ["a", " ", "", "ENo"], False),
        (("xy", "b"), ["a", "x", "b"], ["a", "", "x"], True),
        (("ab", "b"), ["ca", "b"], ["c", ""], True),  # the earliest match wins
        (("",), ["a"], ["a"], False),
    ],
)
def test_stop_scanner(
    stops: tuple[str, ...], pieces: list[str], sent: list[str], stopped: bool
) -> None:
    scanner = StopScanner(stops)
    results = [scanner.feed(p) for p in pieces]
    assert [text for text, _ in results] == sent
    assert results[-1][1] is stopped
    assert [hit for _, hit in results[:-1]] == [False] * (len(pieces) - 1)


def test_stop_scanner_flushes_a_held_back_tail() -> None:
    scanner = StopScanner(("END",))
    assert scanner.feed("the EN") == ("the ", False)
    assert scanner.flush() == "EN"
    assert scanner.flush() == ""


def test_penalties() -> None:
    logits = np.array([2.0, -1.0, 0.5, 3.0], dtype=np.float32)
    params = SamplingParams(
        max_tokens=1, presence_penalty=0.5, frequency_penalty=0.25, repetition_penalty=2.0
    )
    apply_penalties(logits, params, prompt=[0], generated=[1, 1, 2])
    # id 0: prompt only, repetition /2; id 1: *2, then -0.5 -2*0.25; id 2: /2, -0.5 -0.25
    assert logits.tolist() == [1.0, -3.0, -0.5, 3.0]
