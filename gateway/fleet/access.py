"""Keys limited to some models: any other model is the 404 of an unknown one, as OpenAI
answers (it does not tell a key which models exist)."""

from __future__ import annotations

from gateway.deployments import ModelAccess


class ModelGate:
    """The models each key (by name) or profile may use; None: any."""

    __slots__ = ("keys", "profiles")

    def __init__(self, config: ModelAccess) -> None:
        self.keys = {name: frozenset(models) for name, models in config.keys.items()}
        self.profiles = {name: frozenset(models) for name, models in config.profiles.items()}

    def allowed(self, client: str | None, profile: str | None) -> frozenset[str] | None:
        """The model names a request of key ``client`` (profile ``profile``) may ask for."""
        if client is not None:
            found = self.keys.get(client)
            if found is not None:
                return found
        return self.profiles.get(profile) if profile is not None else None

    def may_use(self, client: str | None, profile: str | None, model: str) -> bool:
        """Whether key ``client`` may ask for ``model``."""
        allowed = self.allowed(client, profile)
        return allowed is None or model in allowed


def make_gate(config: ModelAccess) -> ModelGate | None:
    """The gate of ``config``; None when it limits nobody (no cost per request)."""
    return ModelGate(config) if config.keys or config.profiles else None
