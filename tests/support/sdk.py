"""The official ``openai`` SDK pointed at a server on a loopback port (the gateway or the
reference engine), the way users call them: no retries, so that a test sees each answer."""

from __future__ import annotations

from typing import Any

import openai


def sdk(url: str, *, api_key: str = "sk-test", **options: Any) -> openai.AsyncOpenAI:
    """The async client for the OpenAI-compatible server at ``url``."""
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, **options)


def sync_sdk(url: str, *, api_key: str = "sk-test", **options: Any) -> openai.OpenAI:
    """The client for the OpenAI-compatible server at ``url``."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, **options)
