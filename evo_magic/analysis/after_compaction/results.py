"""What `after_compaction` returns: its three frames, their summary with intervals, a figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.intervals import bootstrap_mean, wilson

if TYPE_CHECKING:
    import pandas as pd

COMPACTION_COLUMNS = {
    "session_id": "string",
    "agent_id": "string",
    "compaction": "Int64",
    "call": "Int64",
    "trigger": "string",
    "strategy": "string",
    "before_tokens": "Int64",
    "after_tokens": "Int64",
    "calls_after": "Int64",
    "reads_after": "Int64",
    "repeated_reads": "Int64",
    "commands_after": "Int64",
    "repeated_commands": "Int64",
    "reacquired_tokens": "Int64",
    "calls_to_resume": "Int64",
    "calls_to_next_compaction": "Int64",
    "tokens_to_next_compaction": "Int64",
    "calls_before": "Int64",
    "reads_before": "Int64",
    "repeated_reads_before": "Int64",
    "commands_before": "Int64",
    "repeated_commands_before": "Int64",
    "reacquired_tokens_before": "Int64",
    "source": "string",
    "file": "string",
    "line": "Int64",
}
CALL_COLUMNS = {
    "session_id": "string",
    "agent_id": "string",
    "compaction": "Int64",
    "call": "Int64",
    "calls_since": "Int64",
    "reads": "Int64",
    "repeated_reads": "Int64",
    "commands": "Int64",
    "repeated_commands": "Int64",
    "reacquired_tokens": "Int64",
    "new_work": "boolean",
    "context_tokens": "Int64",
    "source": "string",
}
STRETCH_COLUMNS = {
    "session_id": "string",
    "agent_id": "string",
    "segment": "Int64",
    "epoch": "Int64",
    "compacted": "boolean",
    "calls": "Int64",
    "reads": "Int64",
    "repeated_reads": "Int64",
    "commands": "Int64",
    "repeated_commands": "Int64",
    "reacquired_tokens": "Int64",
    "source": "string",
}
FRAMES = {"compactions": COMPACTION_COLUMNS, "calls": CALL_COLUMNS, "stretches": STRETCH_COLUMNS}
GROUPS = ["source", "trigger", "strategy"]
NONE = "none"
"""The trigger and strategy of the baseline of conversations that never compacted."""


def frame(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str]) -> pd.DataFrame:
    """`rows` as a frame of exactly `columns`, typed (missing values `<NA>`)."""
    import pandas as pd

    data = pd.DataFrame(list(rows), columns=list(columns))
    return data.astype(dict(columns))


@dataclass
class AfterCompaction:
    """What agents did after each recorded compaction, against what they did before it.

    - `compactions`: one row per successful recorded compaction (per conversation: a subagent's
      are its own), with the measures of the calls after it and the same counts over the calls
      before it (`*_before`, the baseline).
    - `calls`: one row per call after each compaction until the next one.
    - `stretches`: one row per epoch of every conversation (compacted or not): its counts
      against everything before it; the baseline of conversations that never compacted.
    - `failures`: sessions whose measure failed on an engine (`session_id`, `error`).
    """

    compactions: pd.DataFrame
    calls: pd.DataFrame
    stretches: pd.DataFrame
    failures: pd.DataFrame

    def __repr__(self) -> str:
        return (
            f"<AfterCompaction: {len(self.compactions)} compaction(s), "
            f"{len(self.calls)} call(s) after them, {len(self.stretches)} stretch(es); "
            ".summary(), .plot()>"
        )

    def summary(self) -> pd.DataFrame:
        """The measures by source, trigger and strategy, after the compactions and before them
        (pooled: repeated reads of all reads, with Wilson intervals; per compaction: means of
        reacquired tokens and of calls to resume, with bootstrap intervals). Conversations that
        never compacted are a row of trigger and strategy "none": their whole stretch is the
        baseline, their "after" columns empty."""
        import pandas as pd

        rows = [_summary_row(key, group) for key, group in _groups(self.compactions)]
        idle = self.stretches[~self._compacted_conversations()]
        for source, group in idle.groupby("source", sort=True):
            rows.append(_baseline_row(str(source), group))
        return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)

    def _compacted_conversations(self) -> pd.Series:
        keys = ["session_id", "agent_id"]
        compacted = self.compactions[keys].drop_duplicates().fillna("\x00")
        mine = self.stretches[keys].fillna("\x00")
        index = pd_index(mine)
        return index.isin(pd_index(compacted))

    def plot(self, ax: Any = None) -> Any:
        """A figure: the share of reads that were repeats after the compactions and before them
        (with intervals), and how many calls agents took to resume. Returns the figure."""
        from evo_magic.analysis.after_compaction.figure import draw

        return draw(self.summary(), self.compactions, ax)


def pd_index(frame: pd.DataFrame) -> pd.MultiIndex:
    import pandas as pd

    return pd.MultiIndex.from_frame(frame.astype(str))


SUMMARY_COLUMNS = [
    *GROUPS,
    "conversations",
    "compactions",
    "repeated_read_share",
    "repeated_read_share_low",
    "repeated_read_share_high",
    "repeated_read_share_before",
    "repeated_read_share_before_low",
    "repeated_read_share_before_high",
    "repeated_command_share",
    "repeated_command_share_low",
    "repeated_command_share_high",
    "repeated_command_share_before",
    "repeated_command_share_before_low",
    "repeated_command_share_before_high",
    "reacquired_tokens",
    "reacquired_tokens_low",
    "reacquired_tokens_high",
    "calls_to_resume",
    "calls_to_resume_low",
    "calls_to_resume_high",
    "resumed_share",
    "calls_to_next_compaction",
]


def _groups(compactions: pd.DataFrame) -> list[tuple[tuple[str, ...], pd.DataFrame]]:
    if compactions.empty:
        return []
    keyed = compactions.assign(**{g: compactions[g].fillna(NONE) for g in GROUPS})
    return [(tuple(map(str, key)), group) for key, group in keyed.groupby(GROUPS, sort=True)]


def _share(k: int, n: int, suffix: str) -> dict[str, float]:
    low, high = wilson(k, n)
    value = k / n if n else float("nan")
    return {suffix: value, f"{suffix}_low": low, f"{suffix}_high": high}


def _mean(values: pd.Series, name: str) -> dict[str, float]:
    data = [float(v) for v in values.dropna()]
    low, high = bootstrap_mean(data)
    value = sum(data) / len(data) if data else float("nan")
    return {name: value, f"{name}_low": low, f"{name}_high": high}


def _summary_row(key: tuple[str, ...], group: pd.DataFrame) -> dict[str, Any]:
    total = lambda column: int(group[column].sum())  # noqa: E731
    resumed = group["calls_to_resume"].notna() & (group["calls_after"] > 0)
    with_calls = int((group["calls_after"] > 0).sum())
    return {
        **dict(zip(GROUPS, key, strict=True)),
        "conversations": len(group[["session_id", "agent_id"]].drop_duplicates()),
        "compactions": len(group),
        **_share(total("repeated_reads"), total("reads_after"), "repeated_read_share"),
        **_share(
            total("repeated_reads_before"), total("reads_before"), "repeated_read_share_before"
        ),
        **_share(total("repeated_commands"), total("commands_after"), "repeated_command_share"),
        **_share(
            total("repeated_commands_before"),
            total("commands_before"),
            "repeated_command_share_before",
        ),
        **_mean(group["reacquired_tokens"], "reacquired_tokens"),
        **_mean(group["calls_to_resume"], "calls_to_resume"),
        "resumed_share": int(resumed.sum()) / with_calls if with_calls else float("nan"),
        "calls_to_next_compaction": group["calls_to_next_compaction"].astype("Float64").mean(),
    }


def _baseline_row(source: str, stretches: pd.DataFrame) -> dict[str, Any]:
    total = lambda column: int(stretches[column].sum())  # noqa: E731
    row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS, float("nan"))
    row.update(
        {
            "source": source,
            "trigger": NONE,
            "strategy": NONE,
            "conversations": len(stretches[["session_id", "agent_id"]].drop_duplicates()),
            "compactions": 0,
            **_share(total("repeated_reads"), total("reads"), "repeated_read_share_before"),
            **_share(
                total("repeated_commands"), total("commands"), "repeated_command_share_before"
            ),
        }
    )
    return row
