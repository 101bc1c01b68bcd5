"""What `retention` measured: the frames (documented in docs/retention.md) and the frontier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.plot_words import label_points
from evo_magic.plot_style import COLOURS, SCREEN_WIDTH, SERIES, finish_axes, house_style, words

if TYPE_CHECKING:
    import pandas as pd

FACT_COLUMNS = {
    "session_id": "string",
    "fact_id": "string",
    "kind": "category",
    "text": "string",
    "origin": "category",
    "first_call": "Int64",
    "question": "string",
    "answer": "string",
}
KEPT_COLUMNS = {
    "strategy": "category",
    "session_id": "string",
    "fact_id": "string",
    "kind": "category",
    "first_call": "Int64",
    "last_kept_call": "Int64",
    "kept_at_end": "boolean",
    "lost_at_call": "Int64",
    "lost_by": "string",
    "recoverable": "string",
    "kept_share": "Float64",
}
CALL_COLUMNS = {
    "strategy": "category",
    "session_id": "string",
    "call": "Int64",
    "facts_seen": "Int64",
    "facts_kept": "Int64",
    "kept_share": "Float64",
}
PROBE_COLUMNS = {
    "strategy": "category",
    "session_id": "string",
    "fact_id": "string",
    "kind": "category",
    "replicate": "Int64",
    "question": "string",
    "answer": "string",
    "reply": "string",
    "correct": "boolean",
    "cost_usd": "Float64",
}
SPAN_COLUMNS = {
    "strategy": "string",
    "session_id": "string",
    "kind": "string",
    "span": "Int64",
    "kept_calls": "Int64",
    "kept_at_end": "boolean",
}
"""Internal: what the totals need of each fact under each setting (a sweep concatenates it)."""
SENT_COLUMNS = {"text": "string", "sent": "boolean"}
"""Internal: whether each fact of each conversation was ever sent (for the unseen warning)."""
TOTAL_COLUMNS = {
    "strategy": "category",
    "kind": "category",
    "facts": "Int64",
    "kept_share": "Float64",
    "kept_at_end_share": "Float64",
    "verbatim_share": "Float64",
    "probes": "Int64",
    "probe_accuracy": "Float64",
    "probe_ci_low": "Float64",
    "probe_ci_high": "Float64",
    "replicates": "Int64",
    "cost_usd": "Float64",
    "probe_cost_usd": "Float64",
}


def frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    """A frame of `rows` with exactly `columns`, typed (missing values are <NA>)."""
    import pandas as pd

    data = pd.DataFrame(rows, columns=list(columns))
    return data.astype({name: dtype for name, dtype in columns.items()})


def records(data: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of `data` as dicts, a missing value as None (however the frame spells it)."""
    plain = data.astype(object)
    return plain.where(plain.notna(), None).to_dict("records")


@dataclass
class Retention:
    """What each strategy setting kept of each fact (see `retention`)."""

    facts: pd.DataFrame
    kept: pd.DataFrame
    calls: pd.DataFrame
    totals: pd.DataFrame
    probes: pd.DataFrame
    """One row per probe answer: the question, the expected answer, the reply, its grade."""
    reader: str | None = None
    judge: str | None = None
    temperature: float | None = None
    """The reader's sampling temperature when it says (None: its default)."""
    failures: pd.DataFrame | None = None
    """A sweep's sessions that failed (`session_id`, `error`); None without an engine."""

    def frontier(self, x: str = "cost_usd", y: str = "kept_share", ax: Any = None) -> Any:
        """`y` against `x`, one labelled point per strategy (the "all" rows of `totals`;
        strategies at one point share a label, and no label overprints another), the axes
        in words ("Cost (USD)").
        Where probes were asked, their accuracy is drawn too, with its 95% interval as an
        error bar. Returns the matplotlib Axes."""
        with house_style(SCREEN_WIDTH):
            return self._frontier(x, y, ax)

    def _frontier(self, x: str, y: str, ax: Any) -> Any:
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        rows = self.totals[self.totals["kind"] == "all"]
        xs = rows[x].astype("Float64").to_numpy(dtype=float, na_value=float("nan"))
        ys = rows[y].astype("Float64").to_numpy(dtype=float, na_value=float("nan"))
        ax.scatter(xs, ys, label=words(y).lower(), color=SERIES[0], zorder=3)
        asked = rows["probes"].fillna(0).astype(int) > 0
        if asked.any():
            accuracy = rows["probe_accuracy"].to_numpy(dtype=float, na_value=float("nan"))
            low = rows["probe_ci_low"].to_numpy(dtype=float, na_value=float("nan"))
            high = rows["probe_ci_high"].to_numpy(dtype=float, na_value=float("nan"))
            centre = ys if y == "probe_accuracy" else accuracy
            # The interval holds the mean; clipped so float rounding never makes a bar negative.
            bars = [(centre - low).clip(min=0), (high - centre).clip(min=0)]
            if y == "probe_accuracy":
                ax.errorbar(xs, ys, yerr=bars, fmt="none", capsize=3, color=COLOURS["interval"])
            else:
                ax.errorbar(
                    xs,
                    accuracy,
                    yerr=bars,
                    fmt="o",
                    mfc="none",
                    capsize=3,
                    color=COLOURS["interval"],
                    label="probe accuracy (95% interval)",
                )
            ax.legend(loc="best")
        finish_axes(ax, x, y, title="What each strategy costs and keeps", width=SCREEN_WIDTH)
        ax.autoscale_view()  # the labels are placed where the points finally are
        label_points(ax, list(zip(xs, ys, strict=True)), [str(s) for s in rows["strategy"]])
        return ax

    def _repr_html_(self) -> str:
        return self.totals[self.totals["kind"] == "all"].to_html(index=False)

    def __repr__(self) -> str:
        shown = self.totals[self.totals["kind"] == "all"]
        return f"<Retention of {len(self.facts)} facts>\n{shown}"
