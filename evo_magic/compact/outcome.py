"""What one strategy's result does to the history, for the `Compactor`: the result checked
(`compact.results`) into rewrites in place or a new history (the original on disk first), and
the rewrites applied as a micro-compaction. The compactor keeps the state and the events'
order; this part holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.attempt import Attempt
from evo_magic.compact.base import Context, Strategy
from evo_magic.compact.pins import missing_pins, restore_edited_pins, with_pins
from evo_magic.compact.preview import GivenSummary
from evo_magic.compact.results import (
    CompactionRefused,
    block_id,
    check_edits,
    check_replacement,
    in_place_changes,
)
from evo_magic.events import MicroCompacted, Notice
from evo_magic.history import History
from evo_magic.measure import ContextSize, to_json
from evo_magic.messages import Message
from evo_magic.prompt_cache import PrefixTracker


@dataclass
class Checked:
    """What a strategy's result does, checked: rewrites in place (`changes`, their `edits`)
    or a new history (`new`, the old one `snapshot` first); `restored` pins put back."""

    changes: dict[int, Message] | None = None
    edits: list[dict[str, Any]] | None = None
    new: list[Message] | None = None
    snapshot: str = ""
    restored: int = 0


def checked_result(
    strategy: Strategy,
    ctx: Context,
    attempt: Attempt,
    given: GivenSummary | None,
    history: History,
    snapshot: Callable[[list[Message]], str],
) -> Checked | None:
    """The strategy's result, checked (`compact.results`; CompactionRefused or the
    strategy's own error when it cannot be applied); None when it has nothing to do.
    Before a call an every-call strategy edits in place; run on request, any strategy
    replaces the history (written by `snapshot` first)."""
    view = history.view()
    result = strategy.compact(view, ctx)
    if given is not None and not attempt.summaries:
        raise CompactionRefused(
            "it makes no summary, so there is none to replace with the given one"
        )
    if result is None:
        return None
    in_place = strategy.when == "every_call" and ctx.trigger == "every_call"
    changes = in_place_changes(result, view) if in_place else None
    if changes is not None:
        changes, restored = restore_edited_pins(changes, view, ctx.pins)
        edits = check_edits(changes, view, history.pending_request)
        return Checked(changes, edits, restored=restored) if edits else None
    new = list(result)
    restored = len(missing_pins(new, ctx.pins))
    new = with_pins(new, ctx.pins)
    shrink = ctx.trigger != "every_call"
    check_replacement(new, view, history.pending_request, attempt.before.chars, shrink)
    # The original whole on disk before it is replaced (or no replacement).
    return Checked(new=new, snapshot=snapshot(history.messages), restored=restored)


def pins_restored(strategy: str, count: int) -> Notice:
    """The notice that `strategy` left out `count` pinned texts, which were put back."""
    return Notice(
        "pins_restored",
        f"The strategy {strategy!r} left out {count} pinned text(s); they were put back "
        "verbatim (a pinned text is in every request).",
    )


def rewrite_in_place(
    history: History,
    cache: PrefixTracker | None,
    strategy: str,
    checked: Checked,
    before: ContextSize,
    ctx: Context,
) -> MicroCompacted:
    """Apply a checked in-place result to `history` (the prompt cache told where it broke)
    and say what it did (the event, not emitted)."""
    assert checked.changes is not None and checked.edits is not None
    edits = checked.edits
    first = min(edit["index"] for edit in edits)
    invalidated = ctx.cache_invalidated_tokens(first)  # measured before the rewrite
    history.rewrite(checked.changes)
    if cache is not None:
        cache.edited(first, invalidated)
    after = history.size()
    ids = (block_id(edit["block"]) for edit in edits)
    freed = before.chars - after.chars
    return MicroCompacted(
        cleared_ids=tuple(dict.fromkeys(i for i in ids if i)),
        chars_freed=freed,
        before=before,
        after=after,
        strategy=strategy,
        edits_json=to_json(edits),
        cleared_tokens=history.tokens_of_chars(max(freed, 0)),
        cache_invalidated_tokens=invalidated,
    )
