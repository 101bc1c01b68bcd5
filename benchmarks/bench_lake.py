"""Benchmark: thousands of sessions — the lake, and sweeps on this machine and on Dask.

A synthetic folder of Claude Code sessions of varied sizes (made from the test suite's
real-shaped generator: tool rounds, a compaction, a rewind, a subagent each; new ids per copy)
is loaded into a lake, loaded again unchanged, loaded after one session grew; a part of it is
replayed under six strategy settings with engine="local" and on a two-worker Dask cluster, side
by side, and measured the same way by `retention`; and a folder of about 141 MB is loaded
without a lake. Peak memory is the resident peak of a child process doing only that step
(DuckDB's memory included).

    python -m benchmarks.bench_lake
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.claude_code_session import SID, write_session  # noqa: E402

from benchmarks.bytecode import compiled

SESSIONS = 2_000
TEMPLATES = 40
TARGET_BYTES = 1_000_000_000
REPLAYED = 200
"""Sessions replayed per engine (all 2,000 take about 15 minutes per engine on 2 cores)."""
RETAINED = 50
"""Sessions measured by `retention` per engine (it replays them and follows every fact)."""
BUILD_MB = 600
RELOAD_SECONDS = 2.0
PLAIN_LOAD_MB = 141_000_000
PLAIN_LOAD_RATIO = 3.0


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def make_folder(root: Path, sessions: int, total_bytes: int, seed: int = 0) -> int:
    """`sessions` Claude Code sessions of varied sizes, about `total_bytes` in all, under
    `root/projects/`; returns the bytes written."""
    rng = random.Random(seed)
    made = root / "templates"
    templates = []
    mean_calls = max(int(total_bytes / sessions / 3_300), 8)
    for n in range(TEMPLATES):
        calls = max(int(rng.lognormvariate(0, 0.8) * mean_calls * 0.75), 8)
        project = write_session(made / str(n), calls=calls, seed=n)
        templates.append(
            [(p.relative_to(project), p.read_text()) for p in project.rglob("*.jsonl")]
        )
    written = 0
    for n in range(sessions):
        new_id = SID[:-8] + f"{n:08d}"
        for relative, text in templates[n % TEMPLATES]:
            target = root / "projects" / str(relative).replace(SID, new_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            written += target.write_text(text.replace(SID, new_id))
    return written


_PEAK = """
def peak_mb():
    # VmHWM is this process's own peak; ru_maxrss also counts the parent's resident size at
    # the fork (Linux carries it across exec), which is the benchmark runner's, not ours.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""


def _child(code: str) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; it prints a JSON object; add its peak resident MB."""
    wrapped = (
        "import json, resource, time\n"
        f"{_PEAK}\n"
        f"{code}\n"
        "result['peak_mb'] = peak_mb()\n"
        "print(json.dumps(result))\n"
    )
    compiled()
    done = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the benchmark's child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load_lake(folder: Path, lake: Path) -> dict[str, Any]:
    return _child(
        "from evo_magic import load_transcripts\n"
        "started = time.perf_counter()\n"
        f"t = load_transcripts({str(folder)!r}, lake={str(lake)!r})\n"
        "calls = len(t.calls)\n"
        "result = {'seconds': time.perf_counter() - started, 'read': t.update.read,\n"
        "          'kept': t.update.kept, 'files_read': len(t.update.files_read),\n"
        "          'calls': calls}\n"
    )


def main(runs: int = 3) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "sessions"
        size = make_folder(folder, SESSIONS, TARGET_BYTES)
        lake = root / "lake"
        built = _load_lake(folder / "projects", lake)
        mb = size / 1e6
        rows += [
            _row(
                f"lake: build from {SESSIONS:,} sessions, {mb:,.0f} MB",
                built["seconds"],
                "s",
                None,
                None,
            ),
            _row(
                "lake: build, peak memory",
                built["peak_mb"],
                "MB",
                f"< {BUILD_MB}",
                built["peak_mb"] < BUILD_MB,
            ),
        ]
        reloads = [_load_lake(folder / "projects", lake) for _ in range(runs)]
        reload = statistics.median(r["seconds"] for r in reloads)
        rows.append(
            _row(
                "lake: load again, unchanged",
                reload,
                "s",
                f"< {RELOAD_SECONDS:g}",
                reload < RELOAD_SECONDS and all(r["read"] == 0 for r in reloads),
            )
        )
        grown = next((folder / "projects").glob("*.jsonl"))
        with open(grown, "a", encoding="utf-8") as handle:
            handle.write(grown.read_text().splitlines(keepends=True)[-1])
        appended = _load_lake(folder / "projects", lake)
        members = [grown, *sorted((grown.parent / grown.stem).rglob("*.jsonl"))]
        alone = _child(
            "from pathlib import Path\n"
            "from evo_magic.analysis.transcripts import read_files\n"
            "started = time.perf_counter()\n"
            f"read_files([Path(n) for n in {[str(m) for m in members]!r}], single=False,"
            " label='one').calls\n"
            "result = {'seconds': time.perf_counter() - started}\n"
        )["seconds"]
        rows += [
            _row("  that session's files read alone", alone, "s", None, None),
            _row(
                f"lake: load after one session grew ({appended['files_read']} file(s) read)",
                appended["seconds"],
                "s",
                f"< {RELOAD_SECONDS:g} + that session's read",
                appended["seconds"] < RELOAD_SECONDS + alone and appended["read"] == 1,
            ),
        ]
        rows += _sweeps(lake, runs=1)
        plain = root / "plain" / "projects"
        plain.mkdir(parents=True)
        copied = 0
        for path in sorted((folder / "projects").glob("*.jsonl")):
            if copied >= PLAIN_LOAD_MB:
                break
            stem = path.stem
            for member in [path, *sorted((path.parent / stem).rglob("*.jsonl"))]:
                target = plain / member.relative_to(folder / "projects")
                target.parent.mkdir(parents=True, exist_ok=True)
                copied += target.write_bytes(member.read_bytes())
        loaded = _child(
            "from evo_magic import load_transcripts\n"
            "started = time.perf_counter()\n"
            f"t = load_transcripts({str(plain)!r})\n"
            "result = {'seconds': time.perf_counter() - started}\n"
        )
        ratio = loaded["peak_mb"] * 1e6 / copied
        rows += [
            _row(
                f"load_transcripts of {copied / 1e6:,.0f} MB without a lake",
                loaded["seconds"],
                "s",
                None,
                None,
            ),
            _row("  its peak memory", loaded["peak_mb"], "MB", None, None),
            _row(
                "  peak memory / input",
                ratio,
                "ratio",
                f"< {PLAIN_LOAD_RATIO:g}",
                ratio < PLAIN_LOAD_RATIO,
            ),
        ]
    return rows


def _sweeps(lake: Path, runs: int) -> list[dict[str, Any]]:
    """Replay of REPLAYED sessions of the lake under six settings, and retention of RETAINED of
    them, locally and on Dask."""
    code = (
        "import statistics\n"
        "from evo_magic import load_transcripts, replay, retention\n"
        "from evo_magic.analysis.lake_transcripts import LakeTranscripts\n"
        "from evo_magic.analysis.transcripts import Transcripts\n"
        "from evo_magic.strategies import ClearToolUses, ObservationMasking, SummariseOlder\n"
        "sweep = {'recorded': 'recorded', 'none': [], 'seed': None,\n"
        "         'clear-3': [ClearToolUses(keep=3, trigger_tokens=40_000)],\n"
        "         'masking-10': [ObservationMasking(10)], 'older-20': [SummariseOlder(keep=20)]}\n"
        f"t = LakeTranscripts({str(lake)!r}, Transcripts)\n"
        f"keep = t.session_ids()[:{REPLAYED}]\n"
        "t.index.by_session = {k: t.index.by_session[k] for k in keep}\n"
        "result = {}\n"
        "for engine in ('local', 'dask'):\n"
        "    started = time.perf_counter()\n"
        "    r = replay(t, sweep, model='claude-sonnet-4-5', engine=engine, workers=2,\n"
        "               progress=False)\n"
        "    result[engine] = time.perf_counter() - started\n"
        "    result[engine + '_calls'] = int(r.totals['calls'].iloc[0])\n"
        "    result[engine + '_cost'] = float(r.totals['cost_usd'].sum())\n"
        f"t.index.by_session = {{k: t.index.by_session[k] for k in keep[:{RETAINED}]}}\n"
        "for engine in ('local', 'dask'):\n"
        "    started = time.perf_counter()\n"
        "    rt = retention(t, sweep, model='claude-sonnet-4-5', engine=engine, workers=2,\n"
        "                   progress=False)\n"
        "    result['retention_' + engine] = time.perf_counter() - started\n"
        "    result['retention_' + engine + '_facts'] = len(rt.facts)\n"
        "    result['retention_' + engine + '_totals'] = rt.totals.astype(str).to_csv()\n"
    )
    found = _child(code)
    same = found["local_cost"] == found["dask_cost"]
    kept_same = found["retention_local_totals"] == found["retention_dask_totals"]
    calls = found["local_calls"]
    return [
        _row(
            f"replay of {REPLAYED} sessions ({calls:,} calls) x 6, engine=local, 2 workers",
            found["local"],
            "s",
            None,
            None,
        ),
        _row("  the same on Dask, a local cluster of 2 workers", found["dask"], "s", None, None),
        _row(
            "  Dask vs local (same totals: " + ("yes" if same else "NO") + ")",
            found["dask"] / found["local"],
            "ratio",
            None,
            None,
        ),
        _row(
            f"retention of {RETAINED} sessions ({found['retention_local_facts']:,} facts) x 6, "
            "engine=local, 2 workers",
            found["retention_local"],
            "s",
            None,
            None,
        ),
        _row(
            "  the same on Dask, a local cluster of 2 workers",
            found["retention_dask"],
            "s",
            None,
            None,
        ),
        _row(
            "  Dask vs local (same totals: " + ("yes" if kept_same else "NO") + ")",
            found["retention_dask"] / found["retention_local"],
            "ratio",
            None,
            None,
        ),
    ]


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<70} {row['median']:>12,.3f} {row['unit']}")
