"""CompactPolicy: the session's limits and the numbers of the default pipeline, in one place.

`context_limit`, `token_limit` and `max_failures` steer every strategy (when the context is
over the limit; when automatic compaction pauses); `summary_input_limit` and
`summary_max_tokens` configure the summariser; `max_recent_files` the list a compacted history
carries; the rest are the numbers of the seed's pipeline (`default_pipeline(policy)`:
LargeOutputs, MicroCompact, Summarise). Each field's help is the one text the notebook's
`%config` traits, the `%agent config` table and the README's table are made from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from evo_magic.setting import check_fields, setting

PLACEHOLDER = "[Earlier tool result compacted. Re-run the tool if you need full detail.]"


@dataclass(frozen=True)
class CompactPolicy:
    """Limits and the default pipeline's numbers. Defaults are those of the evo-agent seed.

    Sizes in characters are measured as the length of the JSON encoding of the messages.
    """

    context_limit: int = setting(
        50_000, "Full compaction above this many characters (JSON of the messages).", minimum=1
    )
    token_limit: int | float | None = setting(
        None,
        "Full compaction also above this many tokens of the whole prompt; a number between 0 "
        "and 1 is that share of the model's context window, as Inspect's threshold is "
        "(None: off).",
        check=lambda value: check_token_limit(value),
    )
    window_tokens: int | None = setting(
        None,
        "The model's context window in tokens, for a token_limit below 1 (None: from the "
        "model table).",
        minimum=1,
    )
    keep_recent: int = setting(
        3, "Micro-compaction keeps this many most recent tool results.", minimum=0
    )
    min_chars: int = setting(
        120, "Only tool results longer than this are micro-compacted.", minimum=0
    )
    placeholder: str = setting(PLACEHOLDER, "Text of a micro-compacted tool result.")
    exclude_tools: frozenset[str] = setting(
        frozenset(), "Tools whose results micro-compaction never clears."
    )
    clear_at_least: int = setting(
        0,
        "Micro-compact only when it frees this many characters (each clearing breaks the "
        "prompt cache).",
        minimum=0,
    )
    cache_aware: bool = setting(
        True,
        "Micro-compaction clears only when that saves more than the prompt-cache write it "
        "causes (caching on, a priced model); False: the seed's eager clearing.",
    )
    summary_input_limit: int = setting(
        80_000, "Characters of conversation the summariser sees (head and tail kept).", minimum=1
    )
    summary_max_tokens: int = setting(2_000, "max_tokens of the summary request.", minimum=1)
    summary_in_context: bool = setting(
        False,
        "Ask for summaries in the conversation itself (the agent's prompt, tools off), reading "
        "it from the prompt cache; False: the conversation as text, as the seed does.",
    )
    max_recent_files: int = setting(5, "Recent files listed after a compaction.", minimum=0)
    large_output_limit: int = setting(
        30_000, "Tool outputs longer than this go to a file.", minimum=1
    )
    preview_chars: int = setting(
        2_000, "Characters of such an output kept in the context.", minimum=0
    )
    max_failures: int = setting(
        3, "Failed automatic compactions in a row before automatic compaction pauses.", minimum=1
    )
    max_refills: int = setting(
        3,
        "Automatic compactions in a row after which the context was over the limit again "
        "within two calls before automatic compaction pauses, as Claude Code stops after 3 "
        "(0: never pauses).",
        minimum=0,
    )

    def __post_init__(self) -> None:
        check_fields(self)  # each field's rule, as `%config` and the setters apply it

    def token_limit_for(self, window: int | None) -> int | None:
        """The token limit in tokens: `token_limit` itself, or its share of the context
        window (`window_tokens` when set, else `window`); None when off or when a share has
        no window to apply to."""
        limit = self.token_limit
        if limit is None or limit >= 1:
            return None if limit is None else int(limit)
        window = self.window_tokens or window
        return None if window is None else max(1, int(window * limit))

    def with_changes(self, **changes: object) -> CompactPolicy:
        """A copy with some settings changed (unknown names raise TypeError)."""
        return replace(self, **changes)


def check_token_limit(value: object) -> object:
    """`value` when it is None, a share (0 < share < 1) or an integer >= 1; ValueError
    saying so otherwise."""
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"CompactPolicy.token_limit must be a number or None, got {value!r}")
    share = isinstance(value, float) and 0 < value < 1
    whole = value >= 1 and float(value).is_integer()
    if not (share or whole):
        raise ValueError(
            "CompactPolicy.token_limit must be a share of the window (0 < share < 1) or an "
            f"integer >= 1, got {value!r}"
        )
    return value
