"""Benchmark: behaviour after compaction over the scale benchmark's lake, and rewind.

`after_compaction` over the lake of bench_lake's 2,000 synthetic Claude Code sessions (each with
a compaction, a rewind and a subagent), against the time that lake took to load (target: under
2x); peak memory is the resident peak of a child process doing only that step. `rewind` of 50
compaction points x 6 strategy settings with the offline reader (its summaries and its probes),
on two local workers (target: under 30 s).

    python -m benchmarks.bench_behaviour
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchmarks.bench_lake import SESSIONS, TARGET_BYTES, _child, _row, make_folder  # noqa: E402

LAKE_RATIO = 2.0
POINTS = 50
REWIND_SECONDS = 30.0
SWEEP = (
    "{'recorded': 'recorded', 'none': [], 'seed': None,"
    " 'clear-3': [ClearToolUses(keep=3, trigger_tokens=40_000)],"
    " 'masking-10': [ObservationMasking(10)], 'older-20': [SummariseOlder(keep=20)]}"
)


def main(sessions: int = SESSIONS, total_bytes: int = TARGET_BYTES) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "sessions"
        size = make_folder(folder, sessions, total_bytes)
        lake = root / "lake"
        built = _child(
            "from evo_magic import load_transcripts\n"
            "started = time.perf_counter()\n"
            f"t = load_transcripts({str(folder / 'projects')!r}, lake={str(lake)!r})\n"
            "result = {'seconds': time.perf_counter() - started}\n"
        )
        measured = _child(
            "from evo_magic import after_compaction, load_transcripts\n"
            f"t = load_transcripts({str(folder / 'projects')!r}, lake={str(lake)!r})\n"
            "started = time.perf_counter()\n"
            "a = after_compaction(t)\n"
            "result = {'seconds': time.perf_counter() - started,\n"
            "          'compactions': len(a.compactions), 'calls': len(a.calls)}\n"
        )
    ratio = measured["seconds"] / built["seconds"]
    return [*_after_compaction_rows(sessions, size, built, measured, ratio), _rewind_row()]


def _after_compaction_rows(
    sessions: int, size: int, built: dict[str, Any], measured: dict[str, Any], ratio: float
) -> list[dict[str, Any]]:
    return [
        _row(
            f"after_compaction over the lake of {sessions:,} sessions ({size / 1e6:,.0f} MB; "
            f"{measured['compactions']:,} compactions, {measured['calls']:,} calls after)",
            measured["seconds"],
            "s",
            None,
            None,
        ),
        _row("  its peak memory", measured["peak_mb"], "MB", None, None),
        _row(
            f"  vs the lake's load ({built['seconds']:,.1f} s)",
            ratio,
            "ratio",
            f"< {LAKE_RATIO:g}",
            ratio < LAKE_RATIO,
        ),
    ]


def _rewind_row(points: int = POINTS) -> dict[str, Any]:
    """Rewind of `points` sessions of the same generator and sizes as the lake's (one
    compaction each), from their own lake, under six settings, on two local workers."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sessions"
        make_folder(folder, points, TARGET_BYTES * points // SESSIONS)
        lake = Path(tmp) / "lake"
        rewound = _child(
            "import tempfile\n"
            "from evo_magic import load_transcripts, rewind\n"
            "from evo_magic.strategies import ClearToolUses, ObservationMasking, SummariseOlder\n"
            f"t = load_transcripts({str(folder / 'projects')!r}, lake={str(lake)!r})\n"
            "started = time.perf_counter()\n"
            f"r = rewind(t, {SWEEP}, reader='offline', engine='local', workers=2,\n"
            "           progress=False, cache_dir=tempfile.mkdtemp())\n"
            "result = {'seconds': time.perf_counter() - started,\n"
            "          'points': int(r.points[['session_id', 'agent_id', 'point']]\n"
            "                        .drop_duplicates().shape[0]),\n"
            "          'rows': len(r.points), 'probes': len(r.probes)}\n"
        )
    return _row(
        f"rewind of {rewound['points']} points x 6 strategies, offline reader "
        f"({rewound['probes']:,} probes), 2 workers",
        rewound["seconds"],
        "s",
        f"< {REWIND_SECONDS:g}",
        rewound["seconds"] < REWIND_SECONDS,
    )


if __name__ == "__main__":
    if "--rewind" in sys.argv:
        rows = [_rewind_row()]
    elif "--small" in sys.argv:
        rows = main(200, 100_000_000)
    else:
        rows = main()
    for row in rows:
        print(f"{row['figure']:<90} {row['median']:>12,.3f} {row['unit']}")
