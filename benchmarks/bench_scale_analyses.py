"""Benchmark: the analyses (behaviour after compaction, rewind, each research agent's format, an
offline experiment) at 1x, 10x and 100x, beside the load of the same folder, in one run.

The folder is `benchmarks.scale_samples`' copies (new ids each) of the real Claude Code sessions
given by `EVO_MAGIC_SAMPLES`, together with the project's real compacted session
(`tests/fixtures/real/claude-code-compaction`, one automatic compaction after 71 calls): the
shared samples hold no compaction, and an analysis of what follows a compaction needs some. Sizes:
`EVO_MAGIC_SCALE` (default "1,10"); without `EVO_MAGIC_SAMPLES` this benchmark is skipped,
saying so. At each size, in this process, side by side:

- `load_transcripts` of the folder (median of 5 runs below 10x, 3 at 10x, 1 at 100x and over);
- `after_compaction` over the loaded folder, then over the folder's lake (built here first,
  then reopened with nothing changed), each after a run not timed: against the load, and per
  session against the size before;
- `rewind` of the folder's compaction points under the six settings of `bench_behaviour`, with
  the offline reader, in this process: at most `POINTS_CAP` points a size (the sessions holding
  the first ones, cut out of the whole folder's frames), so that 100x stays under a minute and a
  half; per point against the size before;
- each non-Claude format's real fixtures (`bench_formats` and `bench_folders`' copying helpers)
  copied 1x, 10x, 100x, loaded in a fresh interpreter (`bench_formats.measure`): per MB against
  the size before;
- an offline experiment of 1, 10, 100 runs (one built-in task, one strategy, that many
  replicates, local engine, 2 workers): its overhead per run (outside model and check) against
  the size before.

A target "vs the size before" holds when the cost per unit grows by at most `GROWTH` from one
size to the next (linear work gives about 1, less where a fixed cost is shared out; work that
grows with the square of the folder gives about 10). The steps run in this process compare their
CPU time (the work, which the other processes of a shared machine do not stretch); those in a
fresh interpreter or in workers, their wall time.

    export EVO_MAGIC_SAMPLES=path/to/sessions EVO_MAGIC_SCALE=1,10,100
    python -m benchmarks.bench_scale_analyses
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import bench_behaviour, bench_folders, bench_formats
from benchmarks.scale_samples import build

COMPACTED = bench_formats.REAL / "claude-code-compaction"
"""A real Claude Code session with an automatic compaction, added to the samples."""
RUNS = 3
"""Runs of each in-process step at 10x (5 below, 1 at 100x and over)."""
POINTS_CAP = 40
"""The most compaction points rewound at one size (the sessions holding the first ones)."""
GROWTH = 1.5
"""The most a cost per unit (session, point, MB, run) may grow from one size to the next."""
AFTER_VS_LOAD = 0.5
"""`after_compaction` over the loaded folder: at most this share of the folder's load."""
LAKE_AFTER_VS_LOAD = 1.0
"""`after_compaction` over the folder's lake: at most the plain load of the same folder."""
EXPERIMENT_STRATEGY = {"seed": "default"}


def _row(figure: str, median: float, unit: str, target: str | None = None, met: Any = None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def _ratio_row(figure: str, ratio: float, most: float) -> dict:
    """A ratio row whose target is at most `most`."""
    return _row(figure, ratio, "ratio", f"<= {most:g}", ratio <= most)


def _growth_row(figure: str, now: float, before: float | None) -> list[dict]:
    """The row comparing a cost per unit with the size before's (none at the first size)."""
    if before is None or before <= 0:
        return []
    ratio = now / before
    return [_ratio_row(figure, ratio, GROWTH)]


@dataclass(frozen=True)
class Timing:
    """A step's wall seconds and this process's CPU seconds (all its threads) in it: the wall
    time is what a user waits; the CPU time is the work, which other processes on a shared
    machine do not stretch, so the growth from one size to the next is read from it."""

    wall: float
    cpu: float


def _timed(work: Callable[[], Any]) -> tuple[Timing, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the samples' own oddities, said once per load
        started, cpu = time.perf_counter(), time.process_time()
        result = work()
        return Timing(time.perf_counter() - started, time.process_time() - cpu), result


def _median(work: Callable[[], Any], runs: int, warm: bool = False) -> tuple[Timing, Any]:
    """The median wall and CPU seconds of `runs` runs of `work`, and its last result; `warm`:
    after one run not timed (an analysis's first run fills caches every later one finds: at
    each size alike, whatever its number of runs)."""
    if warm:
        _timed(work)
    timed = [_timed(work) for _ in range(runs)]
    wall = statistics.median(t.wall for t, _ in timed)
    return Timing(wall, statistics.median(t.cpu for t, _ in timed)), timed[-1][1]


def samples_with_compaction(samples: Path, into: Path) -> Path:
    """One folder holding the sessions of `samples` and the real compacted session."""
    if not into.exists():
        shutil.copytree(samples, into / "samples")
        shutil.copytree(COMPACTED, into / "compacted")
    return into


@dataclass
class Previous:
    """The size before's cost per unit of each measure, by the measure's name."""

    per_unit: dict[str, float]

    def rows(self, name: str, figure: str, now: float) -> list[dict]:
        before = self.per_unit.get(name)
        self.per_unit[name] = now
        return _growth_row(figure, now, before)


def claude_rows(folder: Path, lake: Path, tag: str, previous: Previous, runs: int) -> list[dict]:
    """The load of `folder`, `after_compaction` over it and over its lake, and rewind."""
    from evo_magic import after_compaction, load_transcripts

    load, t = _median(lambda: _loaded(load_transcripts(folder)), runs)
    sessions = len(t.session_ids())
    after, found = _median(lambda: after_compaction(t), runs, warm=True)
    shutil.rmtree(lake, ignore_errors=True)
    built, _ = _timed(lambda: _loaded(load_transcripts(folder, lake=lake)))
    reopened = load_transcripts(folder, lake=lake)
    on_lake, _ = _median(lambda: after_compaction(reopened), runs, warm=True)
    what = f"{len(found.compactions):,} compactions, {len(found.calls):,} calls after"
    rows = [
        _row(f"{tag}: load_transcripts ({sessions:,} sessions)", load.wall, "s"),
        _row(f"{tag}: after_compaction over the loaded folder ({what})", after.wall, "s"),
        _ratio_row(f"{tag}: after_compaction vs the folder's load", after.wall / load.wall,
                   AFTER_VS_LOAD),  # fmt: skip
        *previous.rows(
            "after", f"{tag}: after_compaction, CPU time per session vs the size before",
            after.cpu / sessions,
        ),
        _row(f"{tag}: its lake's build (context)", built.wall, "s"),
        _row(
            f"{tag}: after_compaction over the folder's lake, reopened unchanged",
            on_lake.wall, "s",
        ),
        _ratio_row(
            f"{tag}: after_compaction over the lake vs the folder's plain load",
            on_lake.wall / load.wall,
            LAKE_AFTER_VS_LOAD,
        ),
        *previous.rows(
            "lake",
            f"{tag}: after_compaction over the lake, CPU time per session vs the size before",
            on_lake.cpu / sessions,
        ),
    ]  # fmt: skip
    return rows + rewind_rows(t, tag, previous)


def _loaded(t: Any) -> Any:
    len(t.blocks), len(t.calls)  # a lake reads its frames on use
    return t


def sweep() -> dict[str, Any]:
    """The six settings `bench_behaviour` rewinds under (its declaration, evaluated)."""
    from evo_magic.strategies import ClearToolUses, ObservationMasking, SummariseOlder

    # bench_behaviour declares them as the source its child process runs: evaluated here, with
    # only the three strategy classes in scope, so that the six settings are written once.
    names = {"ClearToolUses": ClearToolUses, "ObservationMasking": ObservationMasking}
    return eval(bench_behaviour.SWEEP, {**names, "SummariseOlder": SummariseOlder})


def capped(t: Any, cap: int) -> tuple[Any, int, int]:
    """`t` cut to the sessions holding its first `cap` compaction points (a session's points
    kept whole), the points kept and the points in all."""
    from evo_magic.analysis.transcripts import Transcripts

    counts = t.compactions.groupby("session_id", sort=False, observed=True).size()
    kept, points = [], 0
    for session_id, count in counts.items():
        if points + count > cap and kept:
            break
        kept.append(session_id)
        points += int(count)
    frames = {
        name: frame[frame["session_id"].isin(kept)].reset_index(drop=True)
        for name, frame in t.frames().items()
        if name != "events" and "session_id" in frame.columns
    }
    return Transcripts(**frames), points, int(counts.sum())


def rewind_rows(t: Any, tag: str, previous: Previous) -> list[dict]:
    """Rewind of the folder's first compaction points (at most `POINTS_CAP`), in this process."""
    from evo_magic import rewind

    part, points, total = capped(t, POINTS_CAP)
    with tempfile.TemporaryDirectory() as cache:
        spent, r = _timed(
            lambda: rewind(part, sweep(), reader="offline", workers=1, cache_dir=cache)
        )
    tried = r.points[["session_id", "agent_id", "point"]].drop_duplicates().shape[0]
    figure = (
        f"{tag}: rewind of {tried} of {total:,} compaction points (cap {POINTS_CAP}) x 6 "
        f"strategies, offline reader ({len(r.probes):,} probes), in this process"
    )
    rows = [_row(figure, spent.wall, "s")]
    if tried:
        rows += previous.rows(
            "rewind", f"{tag}: rewind, CPU time per point vs the size before", spent.cpu / tried
        )
    return rows


CopyFolder = Callable[[Path, int], int]


def _document_copier(name: str) -> CopyFolder:
    return lambda into, target: bench_formats.folder_of(name, into, target)


FORMATS: dict[str, CopyFolder] = {
    **{name: _document_copier(name) for name in bench_formats.FORMATS},
    "openhands conversation folders": bench_folders.conversation_folders,
    "gemini_cli JSON lines": bench_folders.gemini_logs,
}


def format_rows(work: Path, copies: int, previous: Previous) -> list[dict]:
    """Each format's real fixtures copied `copies` times, loaded in a fresh interpreter."""
    rows = []
    for name, copy in FORMATS.items():
        folder = work / f"{name.replace(' ', '-')}-x{copies}"
        once = copy(work / "once", 1)  # one copy of the fixtures: the size of 1x
        shutil.rmtree(work / "once")
        size = copy(folder, once * copies)
        loaded = bench_formats.measure(folder)
        shutil.rmtree(folder)
        mb = size / 1e6
        tag = f"{copies}x load {name} ({mb:,.2f} MB, {loaded['calls']:,} calls)"
        rows += [
            _row(f"{tag}: time (fresh process)", loaded["seconds"], "s"),
            *previous.rows(name, f"{tag}: time per MB vs the size before", loaded["seconds"] / mb),
        ]
    return rows


def experiment_rows(work: Path, runs: int, previous: Previous) -> list[dict]:
    """An offline experiment of `runs` runs (one built-in task, one strategy)."""
    from evo_magic import experiment, tasks

    with tempfile.TemporaryDirectory(dir=work) as out:  # a kept folder's runs would be reused
        started = time.perf_counter()
        x = experiment(tasks.builtin()[0], EXPERIMENT_STRATEGY, replicates=runs, engine="local",
                       workers=2, out=out)  # fmt: skip
        elapsed = time.perf_counter() - started
    overhead = statistics.median(x.runs["wall_s"] - x.runs["model_s"] - x.runs["check_s"])
    tag = f"experiment offline, {len(x.runs)} runs, local x2"
    return [
        _row(f"{tag}: overhead per run (outside model and check)", overhead, "s"),
        *previous.rows("experiment", f"{tag}: overhead per run vs the size before", overhead),
        _row(f"{tag}: elapsed per run (engine start included)", elapsed / len(x.runs), "s"),
    ]


def one_size(samples: Path, root: Path, copies: int, previous: Previous) -> list[dict]:
    folder = root / f"analyses-x{copies}"
    size = build(samples, folder, copies)
    tag = f"{copies}x ({size / 1e6:,.1f} MB)"
    runs = 1 if copies >= 100 else RUNS if copies >= 10 else 5
    timings: dict[str, float] = {}
    rows = []
    lake = root / f"lake-analyses-x{copies}"
    for name, make in (
        ("claude", lambda: claude_rows(folder, lake, tag, previous, runs)),
        ("formats", lambda: format_rows(root, copies, previous)),
        ("experiment", lambda: experiment_rows(root, copies, previous)),
    ):  # fmt: skip
        started = time.perf_counter()
        rows += make()
        timings[name] = time.perf_counter() - started
    spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())
    print(f"[bench_scale_analyses {copies}x: {spent}]", file=sys.stderr)
    return rows


def main() -> list[dict[str, Any]]:
    samples = os.environ.get("EVO_MAGIC_SAMPLES")
    if not samples:
        print(
            "[bench_scale_analyses: skipped, set EVO_MAGIC_SAMPLES to a folder of sessions]",
            file=sys.stderr,
        )
        return []
    sizes = [int(n) for n in os.environ.get("EVO_MAGIC_SCALE", "1,10").split(",")]
    keep = os.environ.get("EVO_MAGIC_SCALE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(keep) if keep else Path(tmp)
        merged = samples_with_compaction(Path(samples), root / "analyses-samples")
        previous = Previous({})
        rows: list[dict[str, Any]] = []
        for copies in sizes:
            rows += one_size(merged, root, copies, previous)
        return rows


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<100} {row['median']:>12,.3f} {row['unit']}  {row['target'] or ''}")
