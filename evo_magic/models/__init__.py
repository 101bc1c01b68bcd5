"""Models the loop can talk to: Claude through the anthropic SDK, the offline stand-in, or a
function (`FunctionModel`)."""

from __future__ import annotations

import os

from evo_magic.models.anthropic import DEFAULT_MODEL, AnthropicModel
from evo_magic.models.base import Model, ModelError, ModelReply, ModelRequest
from evo_magic.models.function import FunctionModel
from evo_magic.models.offline import OfflineModel

__all__ = [
    "DEFAULT_MODEL",
    "AnthropicModel",
    "FunctionModel",
    "Model",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "OfflineModel",
    "default_model_name",
    "has_credentials",
    "resolve_model",
]


def has_credentials() -> bool:
    """True when the environment holds an Anthropic API key or auth token."""
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


def default_model_name() -> str:
    """The model used when none is named: Claude with credentials, else the offline model."""
    return DEFAULT_MODEL if has_credentials() else OfflineModel.name


def resolve_model(spec: Model | str | None) -> Model:
    """A Model from what a user passes: None picks Claude when a key is set, else the offline
    stand-in; "offline" is the stand-in; any other string names a Claude model."""
    if spec is None:
        spec = default_model_name()
    if isinstance(spec, str):
        if not spec.strip():
            raise ValueError("the model name is empty")
        return OfflineModel() if spec.strip() == "offline" else AnthropicModel(spec.strip())
    return spec
