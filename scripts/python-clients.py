"""Run by scripts/python-clients: each structured-output client through the gateway,
checked, one line each; exits 1 if any fails. GATEWAY_URL is the gateway's base URL."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import instructor
import openai
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

BASE_URL = f"{os.environ['GATEWAY_URL']}/v1"
MODEL = "Qwen3.8-Flash-Next"
MESSAGES: Any = [{"role": "user", "content": "Invent a cat, as JSON."}]
# The engine drops maxLength (--drop-keywords): the policy refuses it at its path.
DROPPED = "properties.name.maxLength"
failed = 0


class Cat(BaseModel):
    """What every client asks for: a shape the engine can keep."""

    name: str
    age: int


class ShortCat(BaseModel):
    """A name of at most five characters: a constraint the engine would drop."""

    name: str = Field(max_length=5)
    age: int


def check(name: str, run: Callable[[], str]) -> None:
    global failed
    try:
        print(f"ok    {name}: {run()}")
    except Exception:
        failed += 1
        print(f"FAIL  {name}: {traceback.format_exc()}")


def refused(call: Callable[[], Any], prefix: str) -> str:
    """The call must be refused with a 400 naming the dropped keyword under ``prefix``."""
    try:
        call()
    except Exception as exc:  # each client wraps the SDK's error its own way
        error = exc
        while error is not None and not isinstance(error, openai.BadRequestError):
            error = error.__cause__ or error.__context__  # type: ignore[assignment]
        if not isinstance(error, openai.BadRequestError):
            raise
        body: Any = error.body
        param = body.get("param") if isinstance(body, dict) else None
        if param != f"{prefix}.{DROPPED}" or body.get("code") != "unsupported_schema_keyword":
            raise AssertionError(f"refused otherwise: {body}") from exc
        return f"400 {param}"
    raise AssertionError("expected a 400")


client = openai.OpenAI(base_url=BASE_URL, api_key="sk-python", max_retries=0)
for mode, prefix in (
    (instructor.Mode.JSON_SCHEMA, "response_format.json_schema.schema"),
    (instructor.Mode.TOOLS, "tools[0].function.parameters"),
):
    patched = instructor.from_openai(client, mode=mode)

    def good(patched: Any = patched) -> str:
        cat = patched.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=Cat, max_retries=0, seed=7
        )
        assert isinstance(cat, Cat), cat
        return repr(cat)

    def bad(patched: Any = patched) -> Any:
        return patched.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=ShortCat, max_retries=0
        )

    check(f"instructor {mode.value}", good)
    check(f"instructor {mode.value}, maxLength refused", lambda bad=bad, p=prefix: refused(bad, p))

chat = ChatOpenAI(model=MODEL, base_url=BASE_URL, api_key="sk-python", max_retries=0, seed=7)  # type: ignore[arg-type]
for method, prefix in (
    ("json_schema", "response_format.json_schema.schema"),
    ("function_calling", "tools[0].function.parameters"),
):

    def lc_good(method: str = method) -> str:
        cat = chat.with_structured_output(Cat, method=method).invoke(MESSAGES[0]["content"])
        assert isinstance(cat, Cat), cat
        return repr(cat)

    def lc_bad(method: str = method) -> Any:
        return chat.with_structured_output(ShortCat, method=method).invoke("A cat.")

    check(f"langchain with_structured_output {method}", lc_good)
    check(
        f"langchain with_structured_output {method}, maxLength refused",
        lambda bad=lc_bad, p=prefix: refused(bad, p),
    )

sys.exit(1 if failed else 0)
