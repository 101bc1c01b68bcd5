"""ObservationMasking: the "observation masking" baseline of "The Complexity Trap" (Lindenbauer
et al., arXiv 2508.21433).

Source: the paper's simple strategy for SWE-agent: keep the observations (tool results) of the
last M turns whole (M = 10 in the paper) and replace every older observation by a short
placeholder, leaving the agent's reasoning and actions intact. On SWE-bench Verified it halved
the cost of the raw agent and matched or beat LLM summaries.

Polling (`every=k`, SWE-agent's `polling` of its last-N-observations history processor): the
window of whole results moves only every k turns, k at a time, so for k-1 calls in k the prompt
sent is the previous one plus the new turn, and the cache holds. `every=1` is the paper's.

Cache-aware mode (`cache_aware=True`, evo_magic's addition): masking one more result before
every call breaks the prompt cache from that result on, so the next call writes the rest of the
conversation again; on a recorded Claude Code session eager masking costs about twice what never
compacting does. Cache-aware masking follows MicroCompact's rule (`Context.clearing_pays`):
with a warm cache, results due wait and are masked together once the tokens they free, read
`calls_ahead` more times, cost more than the cache write; over the session's limit they are
masked at once when that brings the history under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, json_chars, result_text, rewrite_blocks
from evo_magic.strategies.params import calls_ahead_parameter, formats_lines
from evo_magic.strategies.placeholders import placeholder_for

MASKED = "[Old tool output omitted: {lines} lines. Run the tool again if you need it.]"


@dataclass(frozen=True)
class ObservationMasking:
    """Keep the tool results of the last `keep_turns` turns whole (a turn: one assistant step
    and its results); mask older ones with a placeholder giving their line count."""

    keep_turns: int = setting(
        10, "Turns whose tool results stay whole (a turn: a step and its results).", minimum=0
    )
    placeholder: str = setting(
        MASKED,
        "Text of a masked result; {lines} is its line count.",
        check=formats_lines,
        rule="{lines} its only field",
    )
    cache_aware: bool = setting(
        False,
        "Mask only when that saves money given the prompt cache; False: mask what is due "
        "before every call, as the paper does.",
    )
    calls_ahead: int = calls_ahead_parameter()
    every: int = setting(
        1,
        "Move the masking window every this many turns (SWE-agent's polling): between moves "
        "the prompt is unchanged up to the newest result, so the cached prefix survives.",
        minimum=1,
    )

    name = "observation-masking"
    when = "every_call"
    source = 'The Complexity Trap (arXiv 2508.21433), "observation masking"'

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        refs = ctx.tool_results(messages)
        if not refs:
            return None
        end = _first_kept(refs, self._kept_turns(refs, ctx.memo))
        masked = []
        freed = 0
        for ref in refs[min(ctx.memo.get("done", 0), end) : end]:  # earlier passes' done
            block = block_at(messages, ref)
            text = result_text(block)
            if text.startswith(self.placeholder.split("{", 1)[0]):
                continue  # already masked
            own = self.placeholder.format(lines=text.count("\n") + 1)
            mask = placeholder_for(own, ref.tool_use_id, ctx)
            saving = json_chars(block.get("content", "")) - json_chars(mask)
            if saving > 0:
                masked.append((ref.index, ref.block_index, {**block, "content": mask}))
                freed += saving
        if masked and self.cache_aware:
            first = min(index for index, _, _ in masked)
            if not ctx.clearing_pays(first, freed, self.calls_ahead):
                return None  # the cache write it causes costs more than it saves: wait
        ctx.memo["done"] = end
        return rewrite_blocks(messages, masked) if masked else None

    def _kept_turns(self, refs: Sequence, memo: dict) -> int:
        """Turns kept whole now: `keep_turns`, plus the turns since the window last moved
        (it moves every `every` turns, so between `keep_turns` and `keep_turns + every - 1`).
        The turns (result messages) are counted once each, in `memo`."""
        if self.every == 1:
            return self.keep_turns
        turns, last = memo.get("turns", 0), memo.get("last_index")
        for ref in refs[memo.get("counted", 0) :]:
            if ref.index != last:
                turns, last = turns + 1, ref.index
        memo.update(turns=turns, last_index=last, counted=len(refs))
        over = turns - self.keep_turns
        return self.keep_turns + over % self.every if over > 0 else self.keep_turns


def _first_kept(refs: Sequence, keep_turns: int) -> int:
    """Position in `refs` of the first result of the last `keep_turns` result messages."""
    if keep_turns <= 0:
        return len(refs)
    seen = 0
    position = len(refs)
    last_index = None
    while position > 0:
        index = refs[position - 1].index
        if index != last_index:
            if seen == keep_turns:
                break
            seen += 1
            last_index = index
        position -= 1
    return position
