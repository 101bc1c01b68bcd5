"""CompactPolicy: the session's compaction limits, in one place.

`context_limit`, `token_limit` (and `window_tokens` for a share of the window) say when the
context is over the limit; `max_failures` and `max_refills` when automatic compaction pauses;
`summary_input_limit`, `summary_max_tokens` and `summary_in_context` configure the summariser
every summarising strategy uses; `max_recent_files` the list a compacted history carries. The
strategies' own numbers are theirs (`evo_magic.strategies`, declared on each). Each field's help
is the one text the notebook's `%config` traits, the `%agent config` table and the settings
table of `docs/notebook.md` are made from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from evo_magic.declared import check_fields, mirror, setting
from evo_magic.summariser import Summariser


@dataclass(frozen=True)
class CompactPolicy:
    """The session's compaction limits. Defaults are those of the evo-agent seed.

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
    # The summariser's numbers, declared on the Summariser: a setting here, written there once.
    summary_input_limit: int = mirror(Summariser, "input_limit")
    summary_max_tokens: int = mirror(Summariser, "max_tokens")
    summary_in_context: bool = mirror(Summariser, "in_context")
    max_recent_files: int = setting(5, "Recent files listed after a compaction.", minimum=0)
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

    def limit_text(self, token_limit: int | None) -> str:
        """The limits in words: "12,000 characters" and, with one, " / 9,000 tokens"."""
        limit = f"{self.context_limit:,} characters"
        return limit + (f" / {token_limit:,} tokens" if token_limit else "")

    def summariser(self, chosen: Summariser | None = None) -> Summariser:
        """The summariser a session with this policy uses: `chosen` when it has one of its
        own, else the seed's with this policy's `summary_*` numbers (live and replay both ask
        here)."""
        if chosen is not None:
            return chosen
        return Summariser(
            input_limit=self.summary_input_limit,
            max_tokens=self.summary_max_tokens,
            in_context=self.summary_in_context,
        )

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
