"""What each known model offers for context: its window, and which of the API's own context
features it accepts.

A shipped table, read from the platform's documentation (the compaction and context editing
pages' "Supported models", the models overview for the windows) on `AS_OF`. Models newer than
every model those pages list are assumed to support what their predecessors do; a model the
table does not know is None everywhere (the feature is tried, and a rejection falls back).

Windows: Claude models hold 200,000 tokens, except those Anthropic's context-windows page lists
with 1,000,000; a `[1m]` tag on the name (as Claude Code writes it) means 1,000,000 too.
OpenAI's GPT-5 family (in Codex sessions) holds 400,000 and none of these features.
"""

from __future__ import annotations

from dataclasses import dataclass

from evo_magic.cost import model_family

AS_OF = "2026-12-04"
SOURCE = (
    "platform.claude.com/docs: build-with-claude/compaction (supported models: Mythos "
    "Preview, Opus 4.7, Opus 4.6, Sonnet 4.6), build-with-claude/context-editing (clearing "
    "edits on every Claude 4 model and later), build-with-claude/context-windows (the "
    "1,000,000-token models, as quoted on 2026-12-04); OpenAI's models page (GPT-5: 400,000)"
)
LONG = 1_000_000
GPT_5_WINDOW = 400_000

COMPACT_EDIT = "compact_20260112"
"""Automatic compaction (`context_management.edits`), beta compact-2026-01-12."""
SUMMARIZE = "summarize"
"""On-demand compaction (the top-level `compaction` parameter), beta compact-2026-09-04."""
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
FEATURES: tuple[str, ...] = (COMPACT_EDIT, SUMMARIZE, CLEAR_TOOL_USES, CLEAR_THINKING)


@dataclass(frozen=True)
class ModelInfo:
    """One model's context window (input tokens) and the context features it accepts."""

    context_window: int
    features: frozenset[str]
    source: str = "documented"
    """"documented" (listed on the pages of `SOURCE`) or "assumed" (newer than every model
    they list)."""


_ALL = frozenset(FEATURES)
_CLEARING = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING})

MODELS: dict[str, ModelInfo] = {
    "claude-fable-5-2": ModelInfo(200_000, _ALL, "assumed"),
    "claude-mythos-5-2": ModelInfo(200_000, _ALL, "assumed"),
    "claude-fable-5-1": ModelInfo(LONG, _ALL, "assumed"),
    "claude-mythos-5-1": ModelInfo(LONG, _ALL, "assumed"),
    "claude-fable-5": ModelInfo(LONG, _ALL, "assumed"),
    "claude-mythos-5": ModelInfo(LONG, _ALL, "assumed"),
    "claude-opus-5-5": ModelInfo(200_000, _ALL, "assumed"),
    "claude-opus-5": ModelInfo(LONG, _ALL, "assumed"),
    "claude-sonnet-5-5": ModelInfo(200_000, _ALL, "assumed"),
    "claude-sonnet-5": ModelInfo(LONG, _ALL, "assumed"),
    "claude-haiku-5-5": ModelInfo(200_000, _ALL, "assumed"),
    "claude-opus-4-8": ModelInfo(LONG, _ALL, "assumed"),
    "claude-mythos-preview": ModelInfo(200_000, _ALL),
    "claude-opus-4-7": ModelInfo(LONG, _ALL),
    "claude-opus-4-6": ModelInfo(LONG, _ALL),
    "claude-sonnet-4-6": ModelInfo(LONG, _ALL),
    "claude-opus-4-5": ModelInfo(200_000, _CLEARING),
    "claude-sonnet-4-5": ModelInfo(200_000, _CLEARING),
    "claude-haiku-4-5": ModelInfo(200_000, _CLEARING),
    "claude-opus-4-1": ModelInfo(200_000, _CLEARING),
    "claude-opus-4": ModelInfo(200_000, _CLEARING),
    "claude-sonnet-4": ModelInfo(200_000, _CLEARING),
    "claude-3-5-haiku": ModelInfo(200_000, frozenset()),
}
"""Known models by family id (see `evo_magic.cost.model_family`)."""


def model_info(model: str) -> ModelInfo | None:
    """What the table knows of `model` (any id of its family), or None."""
    return MODELS.get(model_family(model))


def context_window(model: str) -> int | None:
    """The context window of `model` in input tokens (dated, Bedrock and Vertex names
    included), or None when the model is not known."""
    name = model.strip().lower()
    if name.endswith("[1m]") and model_family(name).startswith("claude-"):
        return LONG
    info = model_info(name)
    if info is not None:
        return info.context_window
    family = model_family(name)
    if family == "gpt-5" or family.startswith(("gpt-5-", "gpt-5.")):
        return GPT_5_WINDOW
    return None


def supports(model: str, feature: str) -> bool | None:
    """True when `model` accepts `feature` (one of `FEATURES`), False when the table says it
    does not, None when the model is not known."""
    if feature not in FEATURES:
        raise ValueError(f"unknown context feature {feature!r}; known: {', '.join(FEATURES)}")
    info = model_info(model)
    return None if info is None else feature in info.features
