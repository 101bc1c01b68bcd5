"""What the project knows about models besides their prices: the size of their context window.

Claude models hold 200,000 tokens, except those Anthropic's context-windows page lists with
1,000,000 (Fable 5.1, Mythos 5.1, Fable 5, Mythos 5, Opus 5, Opus 4.8, 4.7 and 4.6, Sonnet 5,
Sonnet 4.6); a `[1m]` tag on the name (as Claude Code writes it) means 1,000,000 too. OpenAI's
GPT-5 family holds 400,000. Any other model: unknown (None), so that nothing is guessed.
"""

from __future__ import annotations

from evo_magic.cost import model_family

CLAUDE_WINDOW = 200_000
LONG_WINDOW = 1_000_000
GPT_5_WINDOW = 400_000

_LONG_WINDOW_FAMILIES = frozenset(
    {
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-opus-5",
        "claude-opus-4-8",
        "claude-opus-4-7",
        "claude-opus-4-6",
        "claude-sonnet-5",
        "claude-sonnet-4-6",
    }
)


def context_window(model: str) -> int | None:
    """The context window of `model` in tokens (dated, Bedrock and Vertex names included), or
    None when the model is not known."""
    name = model.strip().lower()
    family = model_family(name)
    if family.startswith("claude-"):
        if name.endswith("[1m]") or family in _LONG_WINDOW_FAMILIES:
            return LONG_WINDOW
        return CLAUDE_WINDOW
    if family == "gpt-5" or family.startswith("gpt-5-") or family.startswith("gpt-5."):
        return GPT_5_WINDOW
    return None
