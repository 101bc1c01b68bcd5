"""What the project knows about models besides their prices: their context windows.

Claude (platform.claude.com/docs/en/build-with-claude/context-windows and the models overview,
read 2026-12-04): a 1,000,000-token window for Claude Fable 5.1, Mythos 5.1, Fable 5, Mythos 5,
Opus 5, Sonnet 5, Opus 4.8, Opus 4.7, Opus 4.6 and Sonnet 4.6; "other Claude models, including
Claude Sonnet 4.5, have a 200k-token context window". OpenAI's GPT-5 family (the codex variants
included): 400,000 tokens (platform.openai.com/docs/models, read 2026-12-04).
"""

from __future__ import annotations

import re

from evo_magic.cost import model_family

CLAUDE_DEFAULT_WINDOW = 200_000
GPT5_WINDOW = 400_000

CONTEXT_WINDOWS: dict[str, int] = dict.fromkeys(
    (
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-opus-4-8",
        "claude-opus-4-7",
        "claude-opus-4-6",
        "claude-sonnet-4-6",
    ),
    1_000_000,
)
"""Context windows in tokens by model family, where they differ from the family default."""

_GPT5 = re.compile(r"^(?:openai/)?gpt-5(?:[.-]|$)")


def context_window(model: str) -> int | None:
    """The context window of `model` (any id of it) in tokens, or None when it is not known."""
    if not isinstance(model, str) or not model.strip():
        return None
    family = model_family(model)
    if family in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[family]
    if family.startswith("claude-"):
        return CLAUDE_DEFAULT_WINDOW
    if _GPT5.match(family):
        return GPT5_WINDOW
    return None
