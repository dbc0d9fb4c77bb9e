"""API keys: the keyring, its sources, and the proxy that asks it first."""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import openai
import pytest

from gateway.access.keys import ApiKey, Keyring, hash_key, load_keyring
from gateway.app.factory import create_app
from gateway.errors import AuthenticationFailed
from gateway.observe.exchange import Observers
from gateway.settings import Settings, load_settings
from gateway.yamlsource import SourceError
from tests.support.bodies import (
    ANSWER,
    CHAT,
    MESSAGES,
    MODEL,
    chat,
    openai_error,
    without_fingerprint,
)
from tests.support.gateways import MockEngine, Recorder, asgi_client, gateway_settings
from tests.support.paths import BATCH_PROFILE, policy_with
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread

ALICE = "sk-alice-0123456789"
BATCH = "sk-batch-9876543210"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    policy = policy_with(tmp_path, BATCH_PROFILE)
    keys = tmp_path / "keys.yaml"
    keys.write_text(
        f"keys:\n"
        f"  - {{name: alice, sha256: {hash_key(ALICE)}}}\n"
        f"  - {{name: batch, sha256: {hash_key(BATCH)}, profile: batch}}\n"
    )
    return gateway_settings(policy=policy, overrides={("auth", "keys_file"): str(keys)})


@pytest.fixture
async def client(
    settings: Settings, engine: MockEngine, recorder: Recorder
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, transport=engine.transport)
    app.state.gateway.observer = Observers(app.state.gateway.observer, recorder)
    async with asgi_client(app) as c:
        yield c


def assert_401(response: httpx.Response) -> None:
    openai_error(response, 401, type="invalid_request_error", code="invalid_api_key")
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("sk-wrong"),
        bearer(ALICE + "x"),
        bearer(ALICE[:-1]),
        {"Authorization": ALICE},
        {"Authorization": f"Basic {ALICE}"},
        {"Authorization": "Bearer "},
        {"Api-Key": ALICE},
        {"X-Api-Key": "sk-wrong"},
        {"X-Api-Key": ""},
        {"X-Api-Key": ALICE, "Authorization": f"Bearer {BATCH}"},
        {"X-Api-Key": ALICE, "Authorization": f"Basic {ALICE}"},
    ],
    ids=[
        "none",
        "wrong",
        "longer",
        "shorter",
        "no-scheme",
        "basic",
        "empty",
        "other-header",
        "wrong-x-api-key",
        "empty-x-api-key",
        "two-keys",
        "x-api-key-and-basic",
    ],  # fmt: skip
)
async def test_missing_or_wrong_key_is_401_and_nothing_goes_upstream(
    client: httpx.AsyncClient, engine: MockEngine, headers: dict[str, str]
) -> None:
    response = await client.post(CHAT, json=chat(), headers=headers)
    assert_401(response)
    assert ALICE not in response.text
    assert engine.requests == []


@pytest.mark.anyio
async def test_key_in_the_query_string_is_ignored(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    for query in ({"api_key": ALICE}, {"key": ALICE}, {"authorization": f"Bearer {ALICE}"}):
        assert_401(await client.post(CHAT, json=chat(), params=query))
    assert engine.requests == []


@pytest.mark.anyio
async def test_right_key_passes_and_is_never_forwarded(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder
) -> None:
    response = await client.post(CHAT, json=chat(), headers=bearer(ALICE))
    assert response.status_code == 200
    assert json.loads(without_fingerprint(response.content)) == ANSWER
    (sent,) = engine.requests
    assert "authorization" not in sent.headers
    assert recorder.finished_exchanges[-1].client == "alice"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [{"X-Api-Key": ALICE}, {"X-Api-Key": ALICE, "Authorization": f"Bearer {ALICE}"}],
    ids=["x-api-key", "both-the-same"],
)
async def test_x_api_key_is_a_key_like_bearer_and_is_never_forwarded(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, headers: dict[str, str]
) -> None:
    # Anthropic's header (Claude Code, older Anthropic SDKs); Claude Code's apiKeyHelper
    # sends the key in both.
    response = await client.post(CHAT, json=chat(), headers=headers)
    assert response.status_code == 200
    (sent,) = engine.requests
    assert "authorization" not in sent.headers and "x-api-key" not in sent.headers
    assert recorder.finished_exchanges[-1].client == "alice"


@pytest.mark.anyio
async def test_scheme_is_case_insensitive(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, json=chat(), headers={"Authorization": f"bearer  {ALICE}"})
    assert response.status_code == 200


@pytest.mark.anyio
async def test_engine_key_comes_from_the_config_not_the_client(
    settings: Settings, engine: MockEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_KEY", "sk-engine")
    settings.upstream.api_key_env = "ENGINE_KEY"
    app = create_app(settings, transport=engine.transport)
    async with asgi_client(app) as c:
        assert (await c.post(CHAT, json=chat(), headers=bearer(ALICE))).status_code == 200
    assert [r.headers["authorization"] for r in engine.requests] == ["Bearer sk-engine"]


@pytest.mark.anyio
async def test_models_needs_a_key_probes_do_not(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    assert_401(await client.get("/v1/models"))
    assert engine.requests == []
    response = await client.get("/v1/models", headers=bearer(ALICE))
    assert response.status_code == 200
    assert response.json()["data"] == [{"id": MODEL}]
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200


@pytest.mark.anyio
async def test_a_key_selects_its_policy_profile(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder
) -> None:
    # Interactive keys get the default policy's fan-out, up to n = 8.
    refused = await client.post(CHAT, json=chat(n=12), headers=bearer(ALICE))
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "n"
    assert refused.json()["error"]["code"] == "integer_above_max_value"
    assert engine.requests == []
    served = await client.post(CHAT, json=chat(n=3), headers=bearer(ALICE))
    assert len(served.json()["choices"]) == 3
    assert len(engine.requests) == 3

    # The batch profile raises the maximum to 16, and keeps the action.
    allowed = await client.post(CHAT, json=chat(n=12), headers=bearer(BATCH))
    assert allowed.status_code == 200
    assert len(allowed.json()["choices"]) == 12
    assert recorder.finished_exchanges[-1].client == "batch"
    too_many = await client.post(CHAT, json=chat(n=17), headers=bearer(BATCH))
    assert too_many.status_code == 400
    assert too_many.json()["error"]["param"] == "n"
    assert len(engine.requests) == 3 + 12


@pytest.mark.anyio
async def test_metrics_count_requests_by_key_name(client: httpx.AsyncClient) -> None:
    await client.post(CHAT, json=chat(), headers=bearer(ALICE))
    await client.post(CHAT, json=chat(n=12), headers=bearer(ALICE))  # above alice's maximum
    await client.post(CHAT, json=chat(), headers=bearer(BATCH))
    await client.post(CHAT, json=chat(), headers=bearer("sk-wrong"))
    text = (await client.get("/metrics")).text
    assert 'ft_gateway_client_requests_total{client="alice",status="200"} 1.0' in text
    assert 'ft_gateway_client_requests_total{client="alice",status="400"} 1.0' in text
    assert 'ft_gateway_client_requests_total{client="batch",status="200"} 1.0' in text
    assert "sk-wrong" not in text and ALICE not in text


def test_every_key_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    keys = [ApiKey(name, bytes.fromhex(hash_key(f"sk-{name}"))) for name in ("a", "b", "c")]
    ring = Keyring(keys)

    assert ring.authenticate([(b"authorization", b"Bearer sk-a")]) == ("a", None)
    assert [b for _, b in calls] == [k.digest for k in keys]  # no early exit on a match
    assert {a for a, _ in calls} == {bytes.fromhex(hash_key("sk-a"))}

    calls.clear()
    with pytest.raises(AuthenticationFailed):
        ring.authenticate([(b"authorization", b"Bearer sk-z")])
    assert len(calls) == 3


def test_two_authorization_headers_are_refused() -> None:
    ring = Keyring([ApiKey("a", bytes.fromhex(hash_key("sk-a")))])
    with pytest.raises(AuthenticationFailed, match="Malformed"):
        ring.authenticate([(b"authorization", b"Bearer sk-a"), (b"authorization", b"Bearer x")])


def test_keys_from_an_environment_variable() -> None:
    value = f"alice:{hash_key(ALICE)}, batch:{hash_key(BATCH).upper()}:batch\n"
    ring = load_keyring(None, "GW_KEYS", profiles={"batch"}, environ={"GW_KEYS": value})
    assert ring.authenticate([(b"authorization", f"Bearer {ALICE}".encode())]) == ("alice", None)
    assert ring.authenticate([(b"authorization", f"Bearer {BATCH}".encode())]) == (
        "batch",
        "batch",
    )


def test_keys_from_file_and_environment_together(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys:\n  - {{name: alice, sha256: {hash_key(ALICE)}}}\n")
    ring = load_keyring(
        keys, "GW_KEYS", profiles=(), environ={"GW_KEYS": f"bob:{hash_key('sk-bob')}"}
    )
    assert [k.name for k in ring.keys] == ["alice", "bob"]


def _problem(text: str, tmp_path: Path, profiles: tuple[str, ...] = ()) -> str:
    keys = tmp_path / "keys.yaml"
    keys.write_text(text)
    with pytest.raises(SourceError) as info:
        load_keyring(keys, None, profiles=profiles, environ={})
    return str(info.value).replace(str(keys), "keys.yaml")


H1 = hash_key("one")
H2 = hash_key("two")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("keys: []\n", "keys.yaml:1: keys: no keys: nobody could use the gateway"),
        (
            "keys:\n  - {name: a, sha256: sk-plain-key}\n",
            "keys.yaml:2: keys[0].sha256: must be 64 hexadecimal digits (the SHA-256 of the "
            "key, not the key)",
        ),
        ("keys:\n  - {name: a}\n", "keys.yaml:2: keys[0].sha256: Field required"),
        (
            f"keys:\n  - {{name: a, sha256: {'1' * 64}}}\n",
            "keys.yaml:2: keys[0].sha256: must be a string: put the hash in quotes",
        ),
        (
            f"keys:\n  - {{name: a, sha256: {H1}, profil: x}}\n",
            "keys.yaml:2: keys[0].profil: unknown key",
        ),
        (
            f"keys:\n  - {{name: 'a b', sha256: {H1}}}\n",
            "keys.yaml:2: keys[0].name: String should match pattern",
        ),
        (
            f"keys:\n  - {{name: a, sha256: {H1}}}\n  - {{name: a, sha256: {H2}}}\n",
            "keys.yaml:3: keys[1]: key name 'a' used twice",
        ),
        (
            f"keys:\n  - {{name: a, sha256: {H1}}}\n  - {{name: b, sha256: {H1}}}\n",
            "keys.yaml:3: keys[1]: key 'b' has the same hash as 'a'",
        ),
        (
            f"keys:\n  - {{name: a, sha256: {H1}, profile: nightly}}\n",
            "keys.yaml:2: keys[0].profile: profile 'nightly' is not defined in the policy's "
            "'profiles'",
        ),
        ("- a\n", "keys.yaml:1: (top level): a keys file must be a mapping with 'keys'"),
    ],
)
def test_bad_keys_file_names_the_line(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _problem(text, tmp_path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "environment:0: auth.keys_env: variable GW_KEYS is not set"),
        ("alice", "expected 'name:sha256' or 'name:sha256:profile'"),
        ("alice:sk-plain", "key 'alice': the hash must be 64 hexadecimal digits"),
        (f"a:{H1},a:{H2}", "key name 'a' used twice"),
        (f"a:{H1}:nightly", "profile 'nightly' is not defined"),
    ],
)
def test_bad_keys_variable(value: str, expected: str) -> None:
    with pytest.raises(SourceError, match=expected):
        load_keyring(None, "GW_KEYS", profiles=(), environ={"GW_KEYS": value})


def test_keys_file_path_is_relative_to_the_config(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("auth: {keys_file: secrets/keys.yaml}\n")
    settings = load_settings(config, environ={})
    assert settings.auth.keys_file == tmp_path / "secrets" / "keys.yaml"
    assert settings.auth.enabled


def test_gateway_refuses_to_start_without_its_keys(settings: Settings) -> None:
    settings.auth.keys_env = "GW_KEYS_NOT_SET_ANYWHERE"
    with pytest.raises(SourceError, match="GW_KEYS_NOT_SET_ANYWHERE is not set"):
        create_app(settings)


def test_openai_sdk_with_and_without_a_key(settings: Settings, engine: MockEngine) -> None:
    app = create_app(settings, transport=engine.transport)
    with ServerThread(app) as server:
        wrong, alice, batch = (sync_sdk(server.url, api_key=k) for k in ("sk-wrong", ALICE, BATCH))
        with wrong, alice, batch:
            with pytest.raises(openai.AuthenticationError) as info:
                wrong.chat.completions.create(model=MODEL, messages=[])
            assert info.value.code == "invalid_api_key"
            answer = alice.chat.completions.create(model=MODEL, messages=MESSAGES)
            assert answer.choices[0].message.content == ANSWER["choices"][0]["message"]["content"]
            assert [m.id for m in batch.models.list()] == [MODEL]
    assert len(engine.requests) == 2
