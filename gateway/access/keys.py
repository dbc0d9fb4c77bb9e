"""API keys: who may use the gateway, under which name, with which policy profile.

Clients send ``Authorization: Bearer KEY``, or ``x-api-key: KEY`` (Anthropic's
header: Claude Code and older Anthropic SDKs send it; with an ``apiKeyHelper``
Claude Code sends the key in both, which is one key). The gateway stores only the SHA-256
of each key (a leaked config or Secret does not leak keys), with a name for logs
and metrics and optionally a policy profile. Keys come from a YAML file

    keys:
      - {name: alice, sha256: 2bb80d53...}
      - {name: batch, sha256: 81b637d8..., profile: batch}

and/or an environment variable holding ``name:sha256[:profile]`` entries
separated by commas or white space. Make a hash with
``printf %s "$KEY" | sha256sum``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway._types import Headers
from gateway.errors import AuthenticationFailed
from gateway.yamlsource import Problem, SourceError, YamlDocument, load_yaml

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$"
_SHA256 = r"^[0-9a-fA-F]{64}$"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ft-gateway"'}


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One accepted key, by its hash."""

    name: str
    digest: bytes
    profile: str | None = None


class _KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_NAME, description="shown in logs and metrics")
    sha256: str = Field(pattern=_SHA256, description="hex SHA-256 of the key")
    profile: str | None = Field(default=None, description="policy profile this key selects")


class _KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[_KeyEntry]


def hash_key(key: str) -> str:
    """The hex SHA-256 under which a key is configured."""
    return hashlib.sha256(key.encode()).hexdigest()


def _key(name: str, sha256: str, profile: str | None) -> ApiKey:
    return ApiKey(name=name, digest=bytes.fromhex(sha256), profile=profile or None)


def read_keys_file(doc: YamlDocument) -> list[tuple[ApiKey, Problem]]:
    """The keys of a parsed keys file, each with where it was defined."""
    if not isinstance(doc.data, dict):
        raise SourceError([doc.problem((), "a keys file must be a mapping with 'keys'")])
    try:
        parsed = _KeysFile.model_validate(doc.data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            if loc[-1:] == ("sha256",) and err["type"] == "string_pattern_mismatch":
                message = "must be 64 hexadecimal digits (the SHA-256 of the key, not the key)"
            elif loc[-1:] == ("sha256",) and err["type"] == "string_type":
                message = "must be a string: put the hash in quotes"
            problems.append(doc.problem(loc, message))
        raise SourceError(problems) from exc
    return [
        (_key(e.name, e.sha256, e.profile), doc.problem(("keys", i), ""))
        for i, e in enumerate(parsed.keys)
    ]


def parse_keys_env(value: str, *, variable: str) -> list[tuple[ApiKey, Problem]]:
    """Keys from ``name:sha256[:profile]`` entries separated by commas or white space."""
    out: list[tuple[ApiKey, Problem]] = []
    problems: list[Problem] = []
    for index, entry in enumerate(e for e in re.split(r"[,\s]+", value) if e):
        where = Problem(variable, 0, (index,), "")
        parts = entry.split(":")
        if len(parts) not in (2, 3) or not re.match(_NAME, parts[0]):
            problems.append(
                replace(where, message="expected 'name:sha256' or 'name:sha256:profile'")
            )
        elif not re.match(_SHA256, parts[1]):
            problems.append(
                replace(
                    where,
                    message=f"key '{parts[0]}': the hash must be 64 hexadecimal digits "
                    "(the SHA-256 of the key, not the key)",
                )
            )
        else:
            out.append((_key(parts[0], parts[1], parts[2] if len(parts) == 3 else None), where))
    if problems:
        raise SourceError(problems)
    return out


class Keyring:
    """The accepted keys; ``authenticate`` is the proxy's hook."""

    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self.keys = tuple(keys)

    @property
    def profiles(self) -> frozenset[str]:
        return frozenset(k.profile for k in self.keys if k.profile is not None)

    def authenticate(self, headers: Headers) -> tuple[str | None, str | None]:
        """(key name, policy profile) for a request's headers, or AuthenticationFailed.

        Only the Authorization and x-api-key headers count: a key in the query
        string is ignored, so it never works and users learn not to put it in URLs."""
        values = [v for n, v in headers if n == b"authorization"]
        keys = [v.strip() for n, v in headers if n == b"x-api-key"]
        if not values and not keys:
            raise AuthenticationFailed(
                "You didn't provide an API key. Send it in the Authorization header "
                "('Authorization: Bearer YOUR_KEY') or the x-api-key header.",
                headers=_CHALLENGE,
            )
        tokens = set(keys)
        if values:
            scheme, _, token = values[0].strip().partition(b" ")
            token = token.strip()
            if len(values) != 1 or scheme.lower() != b"bearer" or not token:
                raise AuthenticationFailed(
                    "Malformed Authorization header: expected 'Authorization: Bearer YOUR_KEY'.",
                    headers=_CHALLENGE,
                )
            tokens.add(token)
        if len(tokens) != 1 or b"" in tokens:
            raise AuthenticationFailed(
                "Malformed credentials: send one API key, in Authorization or x-api-key "
                "(the same key in both is one key).",
                headers=_CHALLENGE,
            )
        (token,) = tokens
        digest = hashlib.sha256(token).digest()
        found: ApiKey | None = None
        # Every key is compared, each in constant time: neither the time taken
        # nor which key matched depends on how much of a hash was guessed.
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest):
                found = key
        if found is None:
            raise AuthenticationFailed("Incorrect API key provided.", headers=_CHALLENGE)
        return found.name, found.profile


def load_keyring(
    keys_file: Path | None,
    keys_env: str | None,
    *,
    profiles: Iterable[str],
    environ: Mapping[str, str] | None = None,
) -> Keyring:
    """Read the configured keys; SourceError for anything that would let the
    gateway start with fewer keys than meant (unset variable, empty file,
    duplicates, a profile the policy does not define)."""
    environ = os.environ if environ is None else environ
    found: list[tuple[ApiKey, Problem]] = []
    problems: list[Problem] = []
    if keys_file is not None:
        doc = load_yaml(keys_file)
        found.extend(read_keys_file(doc))
        if not found:
            problems.append(doc.problem(("keys",), "no keys: nobody could use the gateway"))
    if keys_env is not None:
        value = environ.get(keys_env, "")
        if not value.strip():
            problems.append(
                Problem("environment", 0, ("auth", "keys_env"), f"variable {keys_env} is not set")
            )
        else:
            found.extend(parse_keys_env(value, variable=f"environment variable {keys_env}"))
    known = set(profiles)
    names: set[str] = set()
    digests: dict[bytes, str] = {}
    for key, where in found:
        if key.name in names:
            problems.append(replace(where, message=f"key name '{key.name}' used twice"))
        if key.digest in digests:
            problems.append(
                replace(
                    where, message=f"key '{key.name}' has the same hash as '{digests[key.digest]}'"
                )
            )
        if key.profile is not None and key.profile not in known:
            problems.append(
                replace(
                    where,
                    path=(*where.path, "profile"),
                    message=f"profile '{key.profile}' is not defined in the policy's 'profiles'",
                )
            )
        names.add(key.name)
        digests[key.digest] = key.name
    if problems:
        raise SourceError(problems)
    return Keyring(key for key, _ in found)
