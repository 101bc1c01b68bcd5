"""What `replay` returns: one row per (strategy, conversation, call), totals per strategy, the
kinds of summaries used, and a plot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evo_magic.plot_style import SCREEN_WIDTH, SERIES, finish_axes, house_style

if TYPE_CHECKING:
    import pandas as pd

CALL_COLUMNS = [
    "strategy",
    "session_id",
    "agent_id",
    "source",
    "call",
    "model",
    "context_messages",
    "context_chars",
    "context_tokens",
    "sent_tokens",
    "tokens_exact",
    "context_window",
    "over_window",
    "breakpoints",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
    "summary_cost_usd",
    "cleared_tokens",
    "compactions_so_far",
    "server_modelled",
    "recorded_tokens",
    "estimated_tokens",
]
"""Columns of `Replay.calls`. `context_tokens` is the prompt the model reads (after the modelled
server's edits), `sent_tokens` the prompt as sent (they differ only where a server strategy
cleared or compacted); `server_modelled` is True on the rows of a setting whose server
strategies (`server-compact`, `server-clear-tool-uses`, `server-clear-thinking`) replay ran
with its modelled server (`analysis.replay.server`). `breakpoints` lists the conversation's
cache breakpoints as (message, block) pairs, as the live loop places them; `over_window` is
True when the modelled prompt exceeds the model's context window (NA when the window is not
known)."""

X_WORDS = "Model call (in recorded order; gaps between conversations)"
Y_WORDS = "Context sent (tokens, whole prompt)"
_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1)))
_MARKERS = ("o", "s", "^", "D", "v")


@dataclass
class Replay:
    """What `replay` measured: one row per (strategy, conversation, call) in `calls`, one per
    strategy in `totals`."""

    calls: pd.DataFrame
    totals: pd.DataFrame
    summaries: pd.DataFrame
    """Per strategy: how many summaries were recorded ones, real ones, stand-ins."""
    failures: pd.DataFrame | None = None
    """Sessions a sweep could not replay (`session_id`, `error`); None without an engine."""

    def plot(self, *, figsize: tuple[float, float] = (11, 4)) -> Any:
        """Context tokens per call, one line per strategy, broken between conversations
        (sessions and subagents); strategies whose lines coincide are drawn dashed with
        markers and the legend says which they overlap. Cost per strategy, beside it, when any
        cost anything (a replay without prices gets no empty panel). Returns the figure."""
        with house_style(SCREEN_WIDTH):
            return self._draw(figsize)

    def _draw(self, figsize: tuple[float, float]) -> Any:
        import matplotlib.pyplot as plt

        cost = self.totals["cost_usd"].astype("Float64").fillna(0)
        priced = bool((cost > 0).any())  # nothing cost anything: no cost panel
        if priced:
            fig, (left, right) = plt.subplots(1, 2, figsize=figsize, width_ratios=(2, 1))
        else:
            fig, left = plt.subplots(figsize=(figsize[0] * 2 / 3, figsize[1]))
        groups = self.calls.groupby("strategy", sort=False)
        series = {name: _with_gaps(rows) for name, rows in groups}
        drawn: list[tuple[str, list[float]]] = []
        for n, (name, (x, y)) in enumerate(series.items()):
            colour = SERIES[n % len(SERIES)]
            same = next((first for first, ys in drawn if _same(ys, y)), None)
            overlaps = sum(1 for first, ys in drawn if _same(ys, y))
            if same is None:
                left.plot(x, y, label=str(name), color=colour)
            else:
                style = _STYLES[(overlaps - 1) % len(_STYLES)]
                marker = _MARKERS[(overlaps - 1) % len(_MARKERS)]
                every = max(len(x) // 12, 1)
                left.plot(
                    x,
                    y,
                    label=f"{name} (overlaps {same})",
                    color=colour,
                    linewidth=1.6,
                    linestyle=style,
                    marker=marker,
                    markevery=(overlaps % every, every),
                    markersize=4,
                )
            drawn.append((str(name), y))
        finish_axes(left, X_WORDS, Y_WORDS, title="Context sent per call", width=SCREEN_WIDTH)
        left.legend(loc="upper left")
        if priced:
            right.barh(self.totals["strategy"], cost.to_numpy(dtype=float), color=SERIES[0])
            finish_axes(right, "cost_usd", "Strategy", title="Total cost", width=SCREEN_WIDTH)
            right.invert_yaxis()
        fig.tight_layout()
        return fig

    def _repr_html_(self) -> str:
        return self.totals.to_html(index=False)

    def __repr__(self) -> str:
        return (
            f"<Replay of {len(self.totals)} strategies, {len(self.calls):,} calls>\n{self.totals}"
        )


def _with_gaps(rows: pd.DataFrame) -> tuple[list[float], list[float]]:
    """x and y of one strategy's line: calls numbered in order, NaN between conversations so
    that no line joins the end of one to the start of the next."""
    x: list[float] = []
    y: list[float] = []
    previous = None
    conversations = zip(rows["session_id"], rows["agent_id"].astype(object), strict=True)
    for position, (conversation, tokens) in enumerate(
        zip(conversations, rows["context_tokens"], strict=True), start=1
    ):
        if previous is not None and conversation != previous:
            x.append(position - 0.5)
            y.append(float("nan"))
        x.append(position)
        y.append(float(tokens))
        previous = conversation
    return x, y


def _same(a: list[float], b: list[float]) -> bool:
    """Equal series (NaN gaps at the same places)."""
    if len(a) != len(b):
        return False
    return all(p == q or (p != p and q != q) for p, q in zip(a, b, strict=True))


def totals(calls: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """One row per strategy label, in `order`."""
    import pandas as pd

    rows = []
    for label in order:
        mine = calls[calls["strategy"] == label]
        last = mine.groupby(["session_id", "agent_id"], dropna=False)["compactions_so_far"].max()
        cost, summaries = mine["cost_usd"], mine["summary_cost_usd"]
        priced = len(cost) and cost.notna().all() and summaries.notna().all()
        rows.append(
            {
                "strategy": label,
                "calls": len(mine),
                "input_tokens": int(mine["input_tokens"].sum()),
                "cache_read_tokens": int(mine["cache_read_tokens"].sum()),
                "cache_write_tokens": int(mine["cache_write_tokens"].sum()),
                "output_tokens": int(mine["output_tokens"].sum()),
                "cost_usd": float(cost.sum() + summaries.sum()) if priced else None,
                "summary_cost_usd": float(summaries.sum()) if priced else None,
                "peak_context_tokens": int(mine["context_tokens"].max()) if len(mine) else 0,
                "over_window_calls": int(mine["over_window"].fillna(False).astype(bool).sum()),
                "compactions": int(last.sum()) if len(last) else 0,
                "tokens_cleared": int(mine["cleared_tokens"].sum()),
                "cache_hit_rate": (
                    float(mine["cache_read_tokens"].sum() / mine["context_tokens"].sum())
                    if mine["context_tokens"].sum()
                    else 0.0
                ),
            }
        )
    return pd.DataFrame(rows)


def summary_counts(summaries: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per strategy label: how many summaries were recorded, real ("model"), stand-ins."""
    import pandas as pd

    table = pd.crosstab(summaries["strategy"], summaries["kind"]) if len(summaries) else None
    rows = []
    for label in order:
        row = {"strategy": label}
        for kind in ("recorded", "model", "stand-in"):
            row[kind] = (
                int(table.loc[label, kind])
                if table is not None and label in table.index and kind in table.columns
                else 0
            )
        rows.append(row)
    return pd.DataFrame(rows)
