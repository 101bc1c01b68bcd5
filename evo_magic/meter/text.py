"""The context meter as plain text: terminal IPython, logs, and the `text/plain` of a saved
notebook; the lines and phrases the HTML meter (`evo_magic.meter.html`) shares.

Every rendering of the meter (this text, the HTML, the widget's state) is of one `MeterData`,
so the live and the saved meter say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from evo_magic.events import ContextSize
from evo_magic.meter.composition import Share
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import Compaction
from evo_magic.meter.tally import Earlier
from evo_magic.meter.words import LAYERS, TRIGGERS, counted
from evo_magic.render import clip, plural, size, usd


def compaction_text(row: Compaction) -> str:
    """One line for a full compaction: what, when, why, before -> after, cost."""
    head = f"{row.label if row.success else 'failed'} after call {row.after_call}: {row.strategy}"
    head += f" ({LAYERS.get(row.layer, row.layer)}; {TRIGGERS.get(row.trigger, row.trigger)})"
    if row.focus:
        head += f' focus "{clip(row.focus, 80)}"'  # as typed, not a repr
    if not row.success:
        return f"{head}: {row.error or 'failed'}; the history was kept"
    return f"{head}: {size(row.before)} -> {size(row.after)}{paid(row.cost_usd, '; ')}"


def paid(cost: float | None, before: str = "") -> str:
    """ "cost $0.0123" after `before`, or "" when it cost nothing (unknown: "cost unknown")."""
    if cost is not None and cost <= 0:
        return ""
    return f"{before}cost {usd(cost)}" if cost is not None else f"{before}cost unknown"


def micro_text(ask: int, rows: Sequence[Compaction]) -> str:
    """One line for the micro-compactions of one ask: how many, what they cleared, freed."""
    strategies = counted(row.strategy for row in rows)
    cleared = [name for row in rows for name in row.cleared]
    freed = sum(row.freed_chars for row in rows)
    tokens = sum(row.freed_tokens for row in rows)
    return (
        f"ask {ask}: {plural(len(rows), 'micro-compaction')} ({strategies}), "
        f"{plural(len(cleared), 'tool result')} cleared, freed {freed:,} chars (~{tokens:,} tokens)"
    )


def earlier_text(earlier: Earlier) -> str:
    """One line for micro-compactions too old to list one ask at a time."""
    return (
        f"earlier: {plural(earlier.count, 'micro-compaction')} in "
        f"{plural(earlier.asks, 'ask')}, freed {earlier.freed_chars:,} chars in all"
    )


def holds_text(holds: Sequence[Share]) -> str:
    """ "system & tools 41% · tool results · bash 22% · ..." (shares of the prompt)."""
    total = sum(share.chars for share in holds)
    if not total:
        return "empty"
    return " · ".join(f"{share.kind} {share.chars / total:.0%}" for share in holds)


def tokens_text(size: ContextSize) -> str:
    """ "~2,000 tokens · 8 messages" (approximate unless the API counted these messages)."""
    approx = "" if size.tokens_exact else "~"
    return f"{approx}{size.tokens:,} tokens · {plural(size.messages, 'message')}"


def change_text(before: ContextSize, now: ContextSize) -> str:
    """ "-1,231 tokens, -7 messages" (signed; "unchanged" when neither changed)."""
    tokens, messages = now.tokens - before.tokens, now.messages - before.messages
    if not tokens and not messages:
        return "unchanged"
    noun = "message" if abs(messages) == 1 else "messages"
    return f"{_signed(tokens)} tokens, {_signed(messages)} {noun}"


def _signed(n: int) -> str:
    return f"+{n:,}" if n > 0 else f"-{-n:,}" if n < 0 else "0"


def cost_note(data: MeterData) -> str | None:
    """What the scope cost, only where it is not zero ("unknown" when a model had no price)."""
    if data.cost_usd is None:
        return "cost unknown (a model without a price)"
    if data.cost_usd <= 0:
        return None
    note = f"cost {usd(data.cost_usd)}"
    if data.scope.label == "cell" and data.session_cost_usd:
        note += f" (session so far {usd(data.session_cost_usd)})"
    return note


def limit_text(data: MeterData) -> str:
    """ "36% of the limit: ~1,114 of 3,104 tokens (12,000 chars of messages)"."""
    approx = "" if data.current.tokens_exact else "~"
    text = (
        f"{data.fill():.0%} of the limit: {approx}{data.current.tokens:,} of "
        f"{data.limit_tokens:,} tokens"
    )
    if data.token_limit and data.token_limit == data.limit_tokens:
        return text + " (the token limit)"
    return text + f" ({data.context_limit:,} chars of messages)"


def meter_text(data: MeterData) -> str:
    """The meter as plain text (terminal IPython, logs, the text/plain of a saved notebook)."""
    lines = [f"context meter · {scope_title(data)}"]
    now = tokens_text(data.current)
    if data.scope.before is not None:
        before = tokens_text(data.scope.before)
        change = change_text(data.scope.before, data.current)
        lines.append(f"context: {before} before the cell -> {now} now ({change})")
    else:
        lines.append(f"context: {now} now")
    lines.append(limit_text(data))
    calls = data.own_calls
    span = f" ({calls[0].call}-{calls[-1].call})" if len(calls) > 1 else ""
    cost = cost_note(data)
    lines.append(f"{plural(len(calls), 'model call')}{span}" + (f"; {cost}" if cost else ""))
    if data.holds:
        lines.append(f"holds: {holds_text(data.holds)}")
    listed, earlier = data.listing()
    if earlier.count:
        lines.append(earlier_text(earlier))
    for item in listed:
        if isinstance(item, Compaction):
            lines.append(compaction_text(item))
            if item.summary:
                lines.append(f"  summary: {clip(item.summary, 200)}")
        else:
            lines.append(micro_text(*item))
    if not data.own_compactions:
        lines.append("no compaction" + (" in this cell" if data.scope.label == "cell" else ""))
    return "\n".join(lines)


def scope_title(data: MeterData) -> str:
    """ "this cell (ask 2)", "this cell", or "the whole session"."""
    if data.scope.label != "cell":
        return "the whole session"
    first, last = data.asks
    if not first:
        return "this cell"
    return f"this cell (ask {first})" if first == last else f"this cell (asks {first}-{last})"
