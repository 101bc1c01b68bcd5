"""MicroCompact: the seed's layer 1. Before every model call, old tool results become a
one-line placeholder. No model call, no loss: the transcript holds the originals.

Source: the evo-agent article's micro-compaction (and learn-claude-code's s06), with its
numbers: the 3 most recent results stay whole, only results over 120 characters are replaced;
the latest batch (results the model has not seen yet) is never touched.

Cache-aware (evo_magic's addition, on by default): replacing an old result breaks the prompt
cache from that message on, so the next call writes the rest of the conversation again. A pass
then clears only when the tokens it frees, read `calls_ahead` more times, cost more than that
write (`Context.clearing_saving`); otherwise it waits, and the results due pile up until
clearing them together pays, the cache goes cold (then clearing is free), or the history is
over the limit and clearing brings it under (a full compaction, which breaks the whole cache,
must not happen because a clearing waited; when clearing cannot avert it, it is left to the
compaction, whose summary then reads the whole history, from the cache when it is asked in
context). With caching off, or for a model without a price, there is nothing to weigh
and it clears as the seed does; `cache_aware=False` is the seed's eager clearing whatever the
cache (with caching on it costs more in the caching benchmark: `docs/caching-cost.md`, "Cache-aware
compaction", and `docs/benchmarks.md`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, json_chars, result_text, rewrite_blocks
from evo_magic.strategies.params import calls_ahead_parameter, non_empty
from evo_magic.strategies.placeholders import placeholder_for

PLACEHOLDER = "[Earlier tool result compacted. Re-run the tool if you need full detail.]"


@dataclass(frozen=True)
class MicroCompact:
    """Replace tool results beyond the `keep_recent` most recent by `placeholder`.

    The `keep_recent` most recent tool results (counting every result, as the seed does) stay
    whole, and so does the latest batch. Of the older ones, a result is replaced when it is
    longer than `min_chars`, is not from a tool in `exclude_tools`, and the placeholder makes
    it shorter. Ids stay, so pairs stay valid. A pass that would free fewer than
    `clear_at_least` characters changes nothing (each clearing breaks the prompt cache from
    that point). Running it twice changes nothing the second time.
    """

    keep_recent: int = setting(
        3, "Most recent tool results kept whole (every result counts).", minimum=0
    )
    min_chars: int = setting(
        120, "Only tool results longer than this many characters are replaced.", minimum=0
    )
    placeholder: str = setting(
        PLACEHOLDER, "Text of a replaced tool result.", check=non_empty, rule="not empty"
    )
    exclude_tools: frozenset[str] = setting(frozenset(), "Tools whose results are never replaced.")
    clear_at_least: int = setting(
        0,
        "Replace only when that frees this many characters (0: whatever is due, as the seed).",
        minimum=0,
    )
    cache_aware: bool = setting(
        True,
        "Replace only when that saves more than the prompt-cache write it causes (caching on, "
        "a priced model); False: the seed's eager clearing.",
    )
    calls_ahead: int = calls_ahead_parameter()

    name = "micro"
    when = "every_call"
    source = "evo-agent's layer 1 (micro-compaction)"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        refs = ctx.tool_results(messages)
        end = len(refs) - self.keep_recent
        if end <= 0:
            return None
        latest = refs[-1].index  # the batch the model has not seen yet
        # Results before memo["done"] were considered in an earlier pass (the parameters never
        # change) and are placeholders or never due: only newer ones need a look (no scan).
        memo = ctx.memo
        start = min(memo.get("done", 0), end)
        chosen: list[tuple[int, int, dict]] = []
        values: list[tuple[object, int]] = []
        stop = end
        for position in range(start, end):
            ref = refs[position]
            if ref.index == latest:
                stop = position
                break
            block = block_at(messages, ref)
            value = block.get("content", "")
            placeholder = placeholder_for(self.placeholder, ref.tool_use_id, ctx)
            done = value in (self.placeholder, placeholder)
            if done or len(result_text(block)) <= self.min_chars:
                continue
            placeholder_chars = json_chars(placeholder)
            if (
                _saving(value, placeholder_chars) > 0
                and ctx.tool_name(block) not in self.exclude_tools
            ):
                chosen.append((ref.index, ref.block_index, {**block, "content": placeholder}))
                values.append((value, placeholder_chars))
        if not chosen:
            return None
        # A string's JSON is at least the string and its quotes: that bound usually settles
        # `clear_at_least` without encoding long outputs; the exact count settles the rest.
        needed = max(self.clear_at_least, 1)
        bound = sum(_saving(v, chars) for v, chars in values)
        if bound < needed and sum(json_chars(v) - chars for v, chars in values) < needed:
            return None  # too little to be worth breaking the cache: wait (none marked done)
        first = min(index for index, _, _ in chosen)
        if self.cache_aware and not ctx.clearing_pays(first, bound, self.calls_ahead):
            return None  # the cache write it causes costs more than it saves: wait
        memo["done"] = stop
        return rewrite_blocks(messages, chosen)


def _saving(value: object, placeholder_chars: int) -> int:
    """At least how many characters the placeholder saves over `value` in the history's JSON:
    a string's JSON is at least the string and its two quotes (the costly exact encoding of a
    long output is left for when this bound does not decide)."""
    if isinstance(value, str) and len(value) + 2 > placeholder_chars:
        return len(value) + 2 - placeholder_chars
    return json_chars(value) - placeholder_chars
