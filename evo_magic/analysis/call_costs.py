"""Prices at load: the `cost_usd` of every loaded call, and each session's totals.

Every reader (a built-in format or a plug-in) gives its calls a model id and usage counts; this
module prices them after the readers, in one place, with the rule live sessions and replay use
(`evo_magic.cost.usage_cost` over the catalog's table), so every source is priced the same
way. A cost an evo_magic transcript recorded (the live session priced the call as it returned,
with the prices it ran with) is kept as recorded; every other call is priced here. A call whose
model has no price stays NA, and the load says so once, naming the models and how to price
them. A call whose recorded usage is not its reply's final usage (`usage_partial`) is priced
from what was recorded, and the load says how many there are: their output, and so their cost,
is understated.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evo_magic.analysis.errors import TranscriptWarning
from evo_magic.cost import Overrides, PriceTable, price_table, usage_cost
from evo_magic.usage import Usage

RECORDED_SOURCE = "evo_magic"
"""The source whose transcripts record each call's cost as the live session priced it."""
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_5m_input_tokens",
    "cache_creation_1h_input_tokens",
)


@dataclass
class Priced:
    """What pricing a calls frame found: the models without a price (and how many calls each)
    and how many calls carry partial usage."""

    unpriced: dict[str, int] = field(default_factory=dict)
    partial: int = 0

    def notice(self) -> str | None:
        """One line naming every model without a price and how to give one; None if none."""
        if not self.unpriced:
            return None
        names = ", ".join(
            f"{model!r} ({n} call{'s' * (n > 1)})" for model, n in self.unpriced.items()
        )
        first = next(iter(self.unpriced))
        return (
            f"No price for {names}: their cost_usd is NA. Price them with "
            f"load_transcripts(..., prices={{{first!r}: {{'input': ..., 'output': ..., "
            f"'cache_read': ...}}}}) (USD per million tokens)."
        )

    def add(self, other: Priced) -> None:
        """Count `other`'s findings too (a lake's build prices batch by batch and warns once
        for the whole build, as a load without a lake does)."""
        for model, n in other.unpriced.items():
            self.unpriced[model] = self.unpriced.get(model, 0) + n
        self.partial += other.partial

    def warn(self, stacklevel: int = 3) -> None:
        """The load's warnings: one for the unpriced models, one for partial usage."""
        notice = self.notice()
        if notice:
            warnings.warn(notice, TranscriptWarning, stacklevel=stacklevel)
        if self.partial:
            warnings.warn(
                f"{self.partial} call{'s' * (self.partial > 1)} carry the usage Claude Code "
                "wrote at the start of a streamed reply, not its final usage (usage_partial): "
                "their output_tokens and cost_usd are understated",
                TranscriptWarning,
                stacklevel=stacklevel,
            )


def price_calls(
    calls: pd.DataFrame, prices: PriceTable | Overrides | None = None
) -> tuple[pd.DataFrame, Priced]:
    """``calls`` with `cost_usd` set for every call whose model has a price and whose usage is
    recorded (a cost an evo_magic transcript recorded is kept), and `usage_partial` False where
    a reader left it unset; and what was found (`Priced`). ``prices`` is a `PriceTable`, a
    mapping of overrides of the catalog's (see `evo_magic.cost.price_table`), or None. Pricing
    a priced frame again with the same table gives the same frame."""
    table = price_table(prices)
    calls = calls.copy()
    if "usage_partial" in calls.columns:
        calls["usage_partial"] = calls["usage_partial"].fillna(False).astype("boolean")
    found = Priced(partial=int(calls["usage_partial"].sum()) if "usage_partial" in calls else 0)
    if calls.empty:
        return calls, found
    counts = calls[list(_COUNTS)]
    has_usage = counts.iloc[:, :4].notna().any(axis=1).to_numpy()
    recorded = (calls["source"].astype(object) == RECORDED_SOURCE).to_numpy()
    recorded = recorded & calls["cost_usd"].notna().to_numpy()
    todo = has_usage & ~recorded
    models = calls["model"].astype(object).fillna("").to_numpy()  # a call without a model: ""
    costs = calls["cost_usd"].astype("Float64").to_numpy(dtype=float, na_value=np.nan).copy()
    costs[todo] = np.nan
    values = counts.to_numpy(dtype=float, na_value=np.nan)
    for model in pd.unique(models[todo]):
        rows = np.flatnonzero(todo & (models == model))
        price = table.lookup(model) if isinstance(model, str) and model.strip() else None
        if price is None:
            if isinstance(model, str) and model.strip():
                found.unpriced[model] = len(rows)
            continue
        for row, counts in zip(rows.tolist(), values[rows].tolist(), strict=True):
            costs[row] = usage_cost(_usage(counts), price).total
    calls["cost_usd"] = pd.array(np.where(np.isnan(costs), None, costs), dtype="Float64")
    return calls, found


def _usage(counts: list[float]) -> Usage:
    """A call's `Usage` from its row of `_COUNTS` (NaN: not recorded)."""
    whole = [None if value != value else int(value) for value in counts]  # NaN != NaN
    return Usage(
        input_tokens=whole[0] or 0,
        output_tokens=whole[1] or 0,
        cache_creation_input_tokens=whole[2] or 0,
        cache_read_input_tokens=whole[3] or 0,
        cache_write_5m_tokens=whole[4],
        cache_write_1h_tokens=whole[5],
    )


SESSION_COLUMNS = {
    "session_id": "string",
    "source": "string",
    "calls": "Int64",
    "cost_usd": "Float64",
    "unpriced_calls": "Int64",
    "partial_calls": "Int64",
    "files": "Int64",
}
"""Columns of the `sessions` frame (in memory and in a lake)."""


def session_totals(calls: pd.DataFrame, files: dict[str, int] | None = None) -> pd.DataFrame:
    """One row per session of ``calls``: its source, how many calls, their cost (NA when a
    call with usage had no price: the total is not known), how many calls had no price or
    carry partial usage, and how many files it came from (``files`` by session id, else the
    distinct files of its calls). Sessions in ``files`` without calls get a row of zeros."""
    rows = []
    groups = {} if calls.empty else dict(tuple(calls.groupby("session_id", observed=True)))
    for session in dict.fromkeys([*groups, *(files or {})]):
        mine = groups.get(session)
        if mine is None or mine.empty:
            rows.append({"session_id": session, "calls": 0, "cost_usd": 0.0, "files": 0})
            rows[-1].update(unpriced_calls=0, partial_calls=0, files=(files or {}).get(session, 0))
            continue
        usage = mine[["input_tokens", "output_tokens"]].notna().any(axis=1)
        unpriced = int((usage & mine["cost_usd"].isna()).sum())
        partial = (
            mine["usage_partial"].fillna(False).astype(bool) if "usage_partial" in mine else None
        )
        rows.append(
            {
                "session_id": str(session),
                "source": str(mine["source"].iloc[0]),
                "calls": len(mine),
                "cost_usd": None if unpriced else float(mine["cost_usd"].fillna(0).sum()),
                "unpriced_calls": unpriced,
                "partial_calls": 0 if partial is None else int(partial.sum()),
                "files": (files or {}).get(session, mine["file"].nunique()),
            }
        )
    frame = pd.DataFrame(rows, columns=list(SESSION_COLUMNS))
    return frame.astype(SESSION_COLUMNS)
