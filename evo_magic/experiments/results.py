"""What an experiment gives: its runs (one row each), the summary per strategy with intervals,
the cost-success frontier, and the transcripts of every run."""

from __future__ import annotations

import html
import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.intervals import bootstrap_mean, wilson
from evo_magic.experiments.run import COLUMNS
from evo_magic.plot_style import COLOURS, SCREEN_WIDTH, SERIES, finish_axes, house_style, words

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from evo_magic.analysis.transcripts import Transcripts

SUMMARY_COLUMNS = (
    "strategy",
    "runs",
    "errors",
    "success_rate",
    "success_low",
    "success_high",
    "cost_usd",
    "cost_low",
    "cost_high",
    "diff_vs_first",
    "diff_low",
    "diff_high",
    "pairs",
    "calls",
    "peak_context_tokens",
    "compactions",
)
_MEANS = ("calls", "peak_context_tokens", "compactions")


class Experiment:
    """An experiment's runs so far, and what is read from them. Made by `experiment(...)`;
    while it runs (in a notebook, shown live) `done`, `failed` and `left` count the runs.

    `stopped` says why runs were left unstarted: None (every run started), "max_cost_usd" or
    "interrupted". Calling `experiment(...)` again with the same `out=` resumes it.
    """

    def __init__(
        self, out: Path, labels: list[str], keys: list[str], seed: int, model: str
    ) -> None:
        self.out = out
        self.labels = labels
        self.seed = seed
        self.model = model
        self.total = len(keys)
        self.stopped: str | None = None
        self.reused = 0
        """Runs read back from `out` (stored by an earlier call), not run by this one."""
        self.finished = False
        self._order = {key: index for index, key in enumerate(keys)}
        self._rows: dict[str, dict[str, Any]] = {}

    def add(self, key: str, row: dict[str, Any]) -> None:
        """Keep the row of run `key` (as it finished, or as read back from `out`)."""
        self._rows[key] = row

    @property
    def failed(self) -> int:
        """Runs that ended with an error."""
        return sum(1 for row in self._rows.values() if _present(row.get("error")))

    @property
    def done(self) -> int:
        """Runs that finished without an error (succeeded or not)."""
        return len(self._rows) - self.failed

    @property
    def left(self) -> int:
        """Runs not finished (not started, or running)."""
        return self.total - len(self._rows)

    @property
    def runs(self) -> pd.DataFrame:
        """One row per finished run, in the experiment's order (the same on every engine):
        task, strategy, replicate, success, score, check_output, calls, cost_usd,
        peak_context_tokens, compactions, wall_s, error, session (its transcript's folder),
        model_s and check_s."""
        import pandas as pd

        ordered = sorted(self._rows.items(), key=lambda item: self._order.get(item[0], 0))
        frame = pd.DataFrame([row for _, row in ordered], columns=list(COLUMNS))
        return frame.astype({"success": bool, "replicate": int}) if len(frame) else frame

    def summary(self, confidence: float = 0.95) -> pd.DataFrame:
        """Per strategy, in the order given: runs, errors (counted as failures), the success
        rate with its Wilson interval, the mean cost per run with a bootstrap interval, the
        paired difference in success against the first strategy over the (task, replicate)
        pairs both ran (bootstrap interval; NaN on the first row), and the mean calls, peak
        context and compactions per run."""
        import pandas as pd

        runs = self.runs
        rows = []
        first = runs[runs["strategy"] == self.labels[0]] if self.labels else runs.iloc[0:0]
        reference = {(r.task, r.replicate): float(r.success) for r in first.itertuples()}
        for index, label in enumerate(self.labels):
            mine = runs[runs["strategy"] == label]
            n, wins = len(mine), int(mine["success"].sum())
            low, high = wilson(wins, n, confidence)
            costs = [float(c) for c in mine["cost_usd"] if _present(c)]
            seed = self.seed * 1000 + index
            paired = [
                float(r.success) - reference[(r.task, r.replicate)]
                for r in mine.itertuples()
                if (r.task, r.replicate) in reference
            ]
            diff = _mean(paired) if index else math.nan
            diff_low, diff_high = (
                bootstrap_mean(paired, seed + 500, confidence) if index else (math.nan, math.nan)
            )
            rows.append(
                {
                    "strategy": label,
                    "runs": n,
                    "errors": int(mine["error"].map(_present).sum()),
                    "success_rate": wins / n if n else math.nan,
                    "success_low": low,
                    "success_high": high,
                    "cost_usd": _mean(costs),
                    "cost_low": bootstrap_mean(costs, seed, confidence)[0],
                    "cost_high": bootstrap_mean(costs, seed, confidence)[1],
                    "diff_vs_first": diff,
                    "diff_low": diff_low,
                    "diff_high": diff_high,
                    "pairs": len(paired) if index else 0,
                    "calls": _mean(mine["calls"].astype(float).tolist()),
                    "peak_context_tokens": _mean(
                        mine["peak_context_tokens"].astype(float).tolist()
                    ),
                    "compactions": _mean(mine["compactions"].astype(float).tolist()),
                }
            )
        return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))

    def frontier(self, x: str = "cost_usd", confidence: float = 0.95) -> Figure:
        """Success rate against mean cost per run (or `x`: "calls", "peak_context_tokens"),
        one point per strategy with its intervals drawn (Wilson up and down; for cost, the
        bootstrap interval across). Returns a matplotlib Figure (made without pyplot)."""
        from matplotlib.figure import Figure

        choices = ("cost_usd", "calls", "peak_context_tokens")
        if x not in choices:
            raise ValueError(f"x must be one of {', '.join(choices)}, got {x!r}")
        table = self.summary(confidence)
        with house_style(SCREEN_WIDTH):
            figure = Figure(figsize=(5.5, 3.6))
            axes = figure.subplots()
            for colour, row in zip(itertools.cycle(SERIES), table.itertuples(), strict=False):
                where, rate = float(getattr(row, x)), float(row.success_rate)
                if math.isnan(where) or math.isnan(rate):
                    continue
                across = None
                if x == "cost_usd" and not math.isnan(row.cost_low):
                    across = [[where - row.cost_low], [row.cost_high - where]]
                axes.errorbar(
                    where,
                    rate,
                    xerr=across,
                    yerr=[[rate - row.success_low], [row.success_high - rate]],
                    fmt="o",
                    capsize=3,
                    color=colour,
                    ecolor=COLOURS["interval"],
                    label=str(row.strategy),
                )
                axes.annotate(str(row.strategy), (where, rate), textcoords="offset points",
                              xytext=(5, 5))  # fmt: skip
            x_words = {"cost_usd": "Mean cost per run (USD)"}.get(
                x, f"Mean {words(x).lower()} per run"
            )
            title = f"{len(self.runs)} runs, {int(confidence * 100)}% intervals"
            finish_axes(axes, x_words, "Success rate", title=title, width=SCREEN_WIDTH)
            axes.set_ylim(-0.05, 1.05)
            figure.tight_layout()
        return figure

    @property
    def transcripts(self) -> Transcripts:
        """`load_transcripts` over every run's session (replay, retention and the other
        analyses take it)."""
        from evo_magic.analysis.transcripts import load_transcripts

        return load_transcripts(self.out / "sessions")  # type: ignore[return-value]

    # -- shown ---------------------------------------------------------------------------

    def status(self) -> str:
        """One line: runs done, failed and left, and why it stopped."""
        state = "finished" if self.finished else "running"
        if self.stopped:
            state = f"stopped ({self.stopped})"
        return (
            f"experiment {self.out}: {self.done} of {self.total} runs done, {self.failed} "
            f"failed, {self.left} left; {state}"
        )

    def _so_far(self) -> list[tuple[str, int, int]]:
        """(strategy, runs finished, successes) in the order given."""
        runs = list(self._rows.values())
        return [
            (
                label,
                sum(1 for r in runs if r["strategy"] == label),
                sum(1 for r in runs if r["strategy"] == label and r["success"]),
            )
            for label in self.labels
        ]

    def __repr__(self) -> str:
        lines = [self.status()]
        for label, n, wins in self._so_far():
            rate = f"{wins / n:.0%}" if n else "-"
            lines.append(f"  {label:<24} {wins:>3} of {n:<3} succeeded ({rate})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><td>{html.escape(label)}</td><td>{n}</td><td>{wins}</td>"
            f"<td>{f'{wins / n:.0%}' if n else '-'}</td></tr>"
            for label, n, wins in self._so_far()
        )
        return (
            f"<div><p>{html.escape(self.status())}</p><table><thead><tr><th>strategy</th>"
            f"<th>runs</th><th>succeeded</th><th>rate so far</th></tr></thead>"
            f"<tbody>{cells}</tbody></table></div>"
        )


def _present(value: Any) -> bool:
    """A value that is there: not None and not NaN."""
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan
