"""What of an engine's own words may reach a client: an allow-shape, not a list of leaks.

An engine's 4xx message, ``param`` and ``code`` are the only engine text the gateway
passes on (a 5xx never carries any; answers' content is the model's). Each passes
only in the shape its field has in a validation error:

- ``message``: printable ASCII text of at most ``MAX_MESSAGE`` characters, its
  whitespace made single spaces. Each word is kept only if it is made of the
  characters of such messages and looks like none of: a URL, a path, an e-mail or
  ``user@host``, an IP address (v4 or v6, with or without a port), a host name
  (dotted labels, ``name:port``), a key (a known prefix, the word after ``Bearer``
  or ``Basic``) or a long opaque string (letters and digits mixed, a long run of
  digits or of anything); such a word becomes ``[redacted]``. A message that is a
  traceback or a page of HTML becomes the generic one.
- ``param``: a field path of a request (``messages[0].content``), else null.
- ``code``: one of OpenAI's codes (``CODES``), else null; ``type``: one of its types.

Whatever its shape, a known secret (the engine keys the gateway sends, the
credentials the client sent) is removed first, by exact match: ``known_secrets``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence

from gateway._types import Headers
from gateway.upstream.engines import Engine

MAX_MESSAGE = 1000
REDACTED = "[redacted]"
# Read no further into an engine's text than this (the work per error stays bounded).
_MAX_INPUT = 8 * MAX_MESSAGE
# A secret shorter than this protects nothing, and removing it would shred the text.
MIN_SECRET = 4
# The client headers that carry a credential of some kind (docs/headers.md).
CREDENTIAL_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"x-api-key", b"api-key", b"cookie"}
)
TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "rate_limit_error",
        "server_error",
        "api_error",
    }
)
# OpenAI's error codes for a request the engine refused, and the gateway's own.
CODES = frozenset(
    {
        "invalid_value",
        "invalid_type",
        "invalid_json",
        "invalid_request_error",
        "missing_required_parameter",
        "unknown_parameter",
        "unsupported_parameter",
        "unsupported_value",
        "unsupported_media_type",
        "context_length_exceeded",
        "string_above_max_length",
        "string_below_min_length",
        "array_above_max_length",
        "array_below_min_length",
        "integer_above_max_value",
        "integer_below_min_value",
        "decimal_above_max_value",
        "decimal_below_min_value",
        "model_not_found",
        "invalid_model",
        "invalid_prompt",
        "invalid_image",
        "invalid_image_url",
        "invalid_function_parameters",
        "content_filter",
        "content_policy_violation",
        "rate_limit_exceeded",
        "request_too_large",
        "previous_response_not_found",
    }
)
# ASCII letters, digits and the punctuation of validation messages; no / \ @ (paths,
# URLs, addresses) and no control or non-ASCII character.
_WORD = re.compile(r"[A-Za-z0-9_.,:;'\"()\[\]{}<>=!?+*%#&|^~`$-]+")
_EDGES = ".,:;'\"()[]{}<>!?`"
_PARTS = re.compile(r"[^A-Za-z0-9]+")
_HOST_LABEL = re.compile(r"[A-Za-z0-9-]+")
_KEY_PREFIX = re.compile(r"(?i)^(?:sk|pk|rk|hf|ghp|gho|ghs|ghu|glpat|xox[abprs]|akia|eyj)[-_]?")
_SCHEMES = frozenset({"bearer", "basic", "digest"})
_INSIDES = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]*\", line \d+|<(?:html|!doctype|body)\b",
    re.IGNORECASE,
)
# A field path: identifiers, with [index] or .index steps.
_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_PARAM = re.compile(rf"{_NAME}(?:\.{_NAME}|\.\d{{1,6}}|\[\d{{1,6}}\])*")
_STEPS = re.compile(r"[.\[\]]+")
MAX_PARAM = 200


def _credentials_of(name: bytes, value: str) -> list[str]:
    """A credential header's value and the secrets inside it: for ``Scheme credential``
    the credential (Basic's decoded user and password too), for a Cookie each value."""
    if name == b"cookie":
        return [value, *(pair.partition("=")[2].strip() for pair in value.split(";"))]
    out = [value]
    scheme, _, credential = value.partition(" ")
    credential = credential.strip()
    if credential:
        out.append(credential)
    if credential and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credential, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        user, _, password = decoded.partition(":")
        out += [user, password]
    return out


def known_secrets(headers: Headers, engines: Iterable[Engine]) -> tuple[str, ...]:
    """Every secret a client must not see: each engine's key (its Authorization) and the
    credentials in the client's request headers; longest first (a secret inside
    another is removed with it)."""
    found: set[str] = set()
    for engine in engines:
        if engine.auth is not None:
            found.update(_credentials_of(b"authorization", engine.auth.decode("latin-1")))
    for name, value in headers:
        if name in CREDENTIAL_HEADERS:
            found.update(_credentials_of(name, value.decode("latin-1")))
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET), key=len, reverse=True))


def remove_secrets(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[redacted]``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _opaque(core: str) -> bool:
    """A key, a digest, an id: a long run, letters and digits mixed, many digits."""
    if _KEY_PREFIX.match(core) and len(core) >= 12:
        return True
    for part in _PARTS.split(core):
        if len(part) > 32:
            return True
        if len(part) >= 8 and not part.isalpha() and not part.isdigit():
            return True
        if len(part) >= 12 and part.isdigit():
            return True
    return False


def _dotted_is_safe(core: str) -> bool:
    """A word with a dot: a decimal number or a field path (``response_format.type``,
    ``messages[0].content``), never an IP address or a host name."""
    parts = core.split(".")
    if all(p.isdigit() for p in parts if p):
        return len(parts) == 2  # 0.5; 10.0.0.1, 1.2.3 are addresses or versions
    if any("_" in p or "[" in p or "]" in p for p in parts):
        return True
    labels = [p for p in parts if p]
    if len(labels) >= 2 and all(_HOST_LABEL.fullmatch(p) for p in labels):
        return max(map(len, labels)) < 2  # e.g, i.e; anything longer reads as a host
    return True


def _safe_word(word: str) -> bool:
    if not _WORD.fullmatch(word) or word.count(":") > 1:
        return False  # (two colons: an IPv6 address, with or without its brackets)
    core = word.strip(_EDGES)
    if not core or core == REDACTED:
        return True
    if ":" in core:
        host, _, port = core.partition(":")
        if host and port.isdigit():
            return False  # host:port
    if "." in core and not _dotted_is_safe(core):
        return False
    return not _opaque(core)


def safe_message(text: object, secrets: Sequence[str] = ()) -> str | None:
    """An engine's message as a client may read it, or None if nothing of it may pass."""
    if not isinstance(text, str) or not text:
        return None
    text = text[:_MAX_INPUT]
    if _INSIDES.search(text):
        return None
    text = remove_secrets(text, secrets)
    out: list[str] = []
    size = 0
    after_scheme = False
    for word in text.split():
        keep = not after_scheme and _safe_word(word)
        after_scheme = word.strip(_EDGES).lower() in _SCHEMES
        word = word if keep else REDACTED
        if not keep and out and out[-1] == REDACTED:
            continue
        if size + len(word) + 1 > MAX_MESSAGE:
            out.append("...")
            break
        out.append(word)
        size += len(word) + 1
    if not any(w != REDACTED and any(c.isalpha() for c in w) for w in out):
        return None
    return " ".join(out)


def safe_param(value: object, secrets: Sequence[str] = ()) -> str | None:
    """An engine's ``param`` if it is a field path of a request, else None."""
    if not isinstance(value, str) or len(value) > MAX_PARAM or not _PARAM.fullmatch(value):
        return None
    if any(secret in value for secret in secrets):
        return None
    steps = _STEPS.split(value)
    return None if any(_opaque(step) for step in steps if step) else value


def safe_code(value: object) -> str | None:
    """An engine's ``code`` if it is one OpenAI uses, else None."""
    return value if isinstance(value, str) and value in CODES else None


def safe_type(value: object) -> str:
    """An engine's ``type`` if it is one of OpenAI's, else ``invalid_request_error``."""
    return value if isinstance(value, str) and value in TYPES else "invalid_request_error"
