"""The Complexity Trap's cost columns (arXiv 2508.21433), replayed on real agent trajectories.

The paper compares, on SWE-agent, the raw agent (every observation kept), observation masking
(the last 10 observations whole, older ones replaced by SWE-agent's placeholder
`Old environment output: (N lines omitted)`), an LLM summary every 21 turns keeping the last 10,
and the hybrid of both. Here each is replayed over recorded trajectories with the actions held
fixed (replay sends what each strategy would have sent; the agent does what it did), priced at
one model's prices with the prompt cache modelled, so the settings compare on one scale.

    python -m benchmarks.complexity_trap   # the table docs/complexity-trap.md shows
    python -m benchmarks.complexity_trap --model claude-sonnet-4-5

A strategy that is not registered in this install (the interval summary comes with its own
change) is left out of the table, and said.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

REAL = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real"
SOURCES = {
    "SWE-agent (3 real trajectories, 11-12 steps)": ["swe-agent-0.x", "swe-agent-1.0"],
    "mini-swe-agent (2 real runs, 41 and 64 steps)": ["mini-swe-agent-2.2", "mini-swe-agent-2.3"],
}
PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
MASKING = f"observation-masking(keep_turns=10, placeholder={PLACEHOLDER!r})"
# The LLM-Summary agent summarises alone: no masking between summaries. The hybrid is one
# strategy (interval-summary masks between its summaries with the same placeholder); stacking
# observation-masking before it would mask twice, the second time with another placeholder.
SUMMARY = "interval-summary(every=21, keep=10, masking=False)"
# The authors' SWE-agent configurations hold the hybrid with summaries every 21 turns and with
# summaries every 43 (both keeping 10 turns, masking all but the last 10 observations).
HYBRID = f"interval-summary(every=21, keep=10, placeholder={PLACEHOLDER!r})"
HYBRID_43 = f"interval-summary(every=43, keep=10, placeholder={PLACEHOLDER!r})"
SETTINGS = {
    "raw agent": [],
    "observation masking (last 10)": [MASKING],
    "LLM summary (every 21, keep 10)": [SUMMARY],
    "hybrid (masking + summary every 21)": [HYBRID],
    "hybrid (masking + summary every 43)": [HYBRID_43],
}


def available() -> tuple[dict[str, list[str]], list[str]]:
    """The settings whose strategies are registered, and the labels left out."""
    from evo_magic.strategies.registry import registered

    names = registered()
    kept, left = {}, []
    for label, specs in SETTINGS.items():
        if all(spec.split("(", 1)[0] in names for spec in specs):
            kept[label] = specs
        else:
            left.append(label)
    return kept, left


def table(model: str) -> tuple[list[dict], list[str]]:
    """One row per (trajectories, setting): calls, tokens sent, cost, change against raw."""
    from evo_magic import load_transcripts, replay
    from evo_magic.prompt_cache.placement import CacheSettings

    settings, left = available()
    rows = []
    for name, folders in SOURCES.items():
        with tempfile.TemporaryDirectory() as work, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the trajectories' own models have no price
            for folder in folders:
                shutil.copytree(REAL / folder, Path(work) / folder)
            t = load_transcripts(work)
            cached = replay(t, settings, model=model).totals.set_index("strategy")
            uncached = replay(t, settings, model=model, cache=CacheSettings(enabled=False))
        plain = uncached.totals.set_index("strategy")
        for label in settings:
            row, bare = cached.loc[label], plain.loc[label]
            sent = row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
            rows.append(
                {
                    "trajectories": name,
                    "setting": label,
                    "calls": int(row["calls"]),
                    "tokens_sent": int(sent),
                    "cost_usd": bare["cost_usd"],
                    "cached_cost_usd": row["cost_usd"],
                    "summary_cost_usd": row["summary_cost_usd"],
                }
            )
        raw = next(r for r in rows if r["trajectories"] == name and r["setting"] == "raw agent")
        for row in rows:
            if row["trajectories"] == name:
                for key in ("tokens_sent", "cost_usd", "cached_cost_usd"):
                    row[f"{key}_vs_raw"] = row[key] / raw[key] - 1
    return rows, left


def markdown(rows: list[dict], left: list[str], model: str) -> str:
    lines = [
        "| trajectories | setting | calls | tokens sent | vs raw | cost, no cache | vs raw "
        "| cost, cache modelled | vs raw | of which summaries |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['trajectories']} | {row['setting']} | {row['calls']} | "
            f"{row['tokens_sent']:,} | {row['tokens_sent_vs_raw']:+.1%} | "
            f"${row['cost_usd']:.3f} | {row['cost_usd_vs_raw']:+.1%} | "
            f"${row['cached_cost_usd']:.3f} | {row['cached_cost_usd_vs_raw']:+.1%} | "
            f"${row['summary_cost_usd']:.3f} |"
        )
    lines.append("")
    lines.append(f"Prices: {model}'s, for every call (output tokens as recorded: NA, so 0, for")
    lines.append("SWE-agent, whose files have no per-call usage). Summaries: the offline")
    lines.append("stand-in's call, priced (the history it reads as input, a stand-in summary's")
    lines.append("size as output); tokens sent count the agent's calls only.")
    if left:
        lines.append("")
        lines.append(f"Not registered in this install, left out: {', '.join(left)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.complexity_trap")
    parser.add_argument("--model", default="claude-sonnet-4-5", help="whose prices to use")
    options = parser.parse_args(argv)
    rows, left = table(options.model)
    print(markdown(rows, left, options.model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
