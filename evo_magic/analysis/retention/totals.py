"""Retention's totals, computed from the measured frames (of one pass, or of a sweep's
sessions concatenated) by one rule: one row per (strategy, kind) present, then the strategy's
"all" row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.intervals import wilson
from evo_magic.analysis.replay.results import totals as replay_totals
from evo_magic.analysis.retention.measure import Measure
from evo_magic.analysis.retention.results import TOTAL_COLUMNS, Retention, frame, records

if TYPE_CHECKING:
    import pandas as pd

Row = dict[str, Any]


def assembled(
    frames: Mapping[str, pd.DataFrame], spec: Measure, failures: pd.DataFrame | None
) -> Retention:
    """The Retention of measured frames: the totals computed from them, the cost of each
    setting from replay's own totals."""
    order = list(spec.strategies)
    replayed = replay_totals(frames["replayed"], order)
    costs = dict(zip(replayed["strategy"], replayed["cost_usd"], strict=True))
    rows = total_rows(
        order,
        records(frames["spans"]),
        records(frames["probes"]),
        costs,
        spec.replicates,
        spec.reader is not None,
    )
    return Retention(
        facts=frames["facts"],
        kept=frames["kept"],
        calls=frames["calls"],
        totals=frame(rows, TOTAL_COLUMNS),
        probes=frames["probes"],
        reader=None if spec.reader is None else spec.reader.name,
        judge=None if spec.judge is None else spec.judge.name,
        temperature=getattr(spec.reader, "temperature", None),
        failures=failures,
    )


def total_rows(
    order: list[str],
    spans: list[Row],
    probes: list[Row],
    costs: Mapping[str, Any],
    replicates: int,
    probed: bool,
) -> list[Row]:
    """The totals of each strategy in `order`, from each fact's span under each setting
    (`spans`) and the probe answers; `costs` is replay's cost of each setting."""
    rows = []
    for strategy in order:
        mine = [row for row in spans if row["strategy"] == strategy]
        answers = [p for p in probes if p["strategy"] == strategy]
        cost = _dollars(costs.get(strategy))
        for kind in [*sorted({row["kind"] for row in mine}), "all"]:
            chosen = [r for r in mine if _of_kind(r, kind) and r["span"]]
            graded = [p for p in answers if _of_kind(p, kind)]
            kept = _kept(chosen)
            asked = _asked(graded, replicates, probed)
            rows.append({"strategy": strategy, "kind": kind, **kept, **asked, "cost_usd": cost})
    return rows


def _of_kind(row: Row, kind: str) -> bool:
    return kind == "all" or row["kind"] == kind


def _dollars(cost: Any) -> float | None:
    import pandas as pd

    return None if cost is None or pd.isna(cost) else float(cost)


def _kept(chosen: Sequence[Row]) -> Row:
    """How much of their spans the `chosen` facts were kept, and at the end; instructions
    kept verbatim."""
    spanned = sum(r["span"] for r in chosen)
    kept = sum(r["kept_calls"] for r in chosen)
    at_end = sum(bool(r["kept_at_end"]) for r in chosen)
    orders = [r for r in chosen if r["kind"] == "instruction"]
    verbatim = sum(bool(r["kept_at_end"]) for r in orders)
    return {
        "facts": len(chosen),
        "kept_share": kept / spanned if spanned else None,
        "kept_at_end_share": at_end / len(chosen) if chosen else None,
        "verbatim_share": verbatim / len(orders) if orders else None,
    }


def _asked(graded: Sequence[Row], replicates: int, probed: bool) -> Row:
    """The probes' accuracy with its 95% interval and their cost (none without a reader)."""
    right = sum(bool(p["correct"]) for p in graded)
    low, high = wilson(right, len(graded))
    prices = [p["cost_usd"] for p in graded]
    priced = None if any(c is None for c in prices) else float(sum(prices))
    return {
        "probes": len(graded) // replicates if probed else 0,
        "probe_accuracy": right / len(graded) if graded else None,
        "probe_ci_low": low if graded else None,
        "probe_ci_high": high if graded else None,
        "replicates": replicates if probed else None,
        "probe_cost_usd": priced if probed else None,
    }
