"""What `rewind` returns: one row per point and strategy, the probes asked, the frontier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.rewind.facts import KINDS, PROBES

if TYPE_CHECKING:
    import pandas as pd

WHERE = {
    "session_id": "string",
    "agent_id": "string",
    "point": "Int64",
    "call": "Int64",
    "strategy": "string",
}
POINT_COLUMNS = {
    **WHERE,
    "compaction": "boolean",
    "before_tokens": "Int64",
    "before_chars": "Int64",
    "after_tokens": "Int64",
    "after_chars": "Int64",
    "summary_input_tokens": "Int64",
    "summary_output_tokens": "Int64",
    "compacting_cost_usd": "Float64",
    "next_call_cost_usd": "Float64",
    "facts": "Int64",
    "kept_share": "Float64",
    **{f"facts_{kind}": "Int64" for kind in KINDS},
    **{f"kept_{kind}": "Float64" for kind in KINDS},
    "modified_files": "string",
    "modified_named": "string",
    "probes": "Int64",
    "probe_accuracy": "Float64",
    "probe_accuracy_low": "Float64",
    "probe_accuracy_high": "Float64",
    **{f"probe_{kind}_accuracy": "Float64" for kind in PROBES},
}
PROBE_COLUMNS = {
    **WHERE,
    "probe": "string",
    "question": "string",
    "answer": "string",
    "replicate": "Int64",
    "reply": "string",
    "correct": "boolean",
    "cost_usd": "Float64",
}
FRAMES = {"points": POINT_COLUMNS, "probes": PROBE_COLUMNS}
FAILURE_COLUMNS = {"session_id": "string", "error": "string"}


def frame(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str]) -> pd.DataFrame:
    """`rows` as a frame of exactly `columns`, typed (missing values `<NA>`)."""
    import pandas as pd

    return pd.DataFrame(list(rows), columns=list(columns)).astype(dict(columns))


@dataclass
class Rewind:
    """Strategies tried at the points a session compacted.

    - `points`: one row per point and strategy (see `rewind`).
    - `probes`: one row per question asked (with a reader).
    - `failures`: sessions whose rewind failed on an engine.
    """

    points: pd.DataFrame
    probes: pd.DataFrame
    failures: pd.DataFrame

    def __repr__(self) -> str:
        strategies = self.points["strategy"].nunique() if len(self.points) else 0
        return (
            f"<Rewind: {len(self.points)} row(s) (points x {strategies} strategies), "
            f"{len(self.probes)} probe answer(s); .frontier()>"
        )

    def frontier(self) -> pd.DataFrame:
        """Per strategy: what compacting cost (the summary) and what the calls after it cost
        (the next call's prompt, uncached), against what was kept (facts, modified files,
        instructions verbatim) and probe accuracy; means over the points. `on_frontier`: no
        other strategy kept as much or more for less (compacting and next call together)."""
        import pandas as pd

        columns = {
            "compacting_cost_usd": "mean",
            "next_call_cost_usd": "mean",
            "after_tokens": "mean",
            "kept_share": "mean",
            "kept_modified": "mean",
            "kept_instruction": "mean",
            "probe_accuracy": "mean",
        }
        if self.points.empty:
            return pd.DataFrame(columns=["strategy", "points", *columns, "cost_usd", "on_frontier"])
        data = self.points.astype({k: "Float64" for k in columns})
        grouped = data.groupby("strategy", sort=False)
        table = grouped.agg(columns)
        table.insert(0, "points", grouped.size())
        cost = table["compacting_cost_usd"].fillna(0) + table["next_call_cost_usd"].fillna(0)
        table["cost_usd"] = cost
        kept = table["kept_share"].fillna(0)
        table["on_frontier"] = [
            not any(
                (cost.iloc[j] <= cost.iloc[i] and kept.iloc[j] >= kept.iloc[i])
                and (cost.iloc[j] < cost.iloc[i] or kept.iloc[j] > kept.iloc[i])
                for j in range(len(table))
            )
            for i in range(len(table))
        ]
        return table.reset_index()
