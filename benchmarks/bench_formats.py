"""Benchmark: loading each research agent's format, on real public files copied to ~100 MB.

For each format read as whole documents (SWE-agent, mini-swe-agent, Inspect AI, OpenHands),
the real files under `tests/fixtures/real/` are copied, each under a name of its own, into one
folder until it holds about `TARGET_BYTES`; a fresh interpreter then loads the folder with
`load_transcripts` and reports the wall time of the load and its peak resident memory (the
process's high-water mark, `VmHWM`, less its resident size before the load; Linux only).
Median of `RUNS`.

    python -m benchmarks.bench_formats
    python -m benchmarks.bench_formats --megabytes 20
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bytecode import compiled

REAL = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real"
FORMATS = {
    "swe_agent": ["swe-agent-*/*.traj"],
    "mini_swe_agent": ["mini-swe-agent-*/*.traj.json"],
    "inspect": ["inspect-eval/*.eval", "inspect-json/*.json"],
    "openhands": ["openhands-events/*.json"],
}
TARGET_BYTES = 100 << 20
RUNS = 3
PROBE = """
import json, sys, time, warnings


def status(key):
    # VmHWM is this process's own peak (ru_maxrss would count the parent's size at the fork).
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(key):
                return int(line.split()[1]) / 1024


from evo_magic import load_transcripts
before = status("VmRSS:")
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t = load_transcripts(sys.argv[1])
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "mb": status("VmHWM:") - before, "calls": len(t.calls),
                  "blocks": len(t.blocks), "sessions": t.blocks["session_id"].nunique()}))
"""


def folder_of(name: str, into: Path, target: int) -> int:
    """Copies of the format's real files in `into` up to `target` bytes; the bytes copied."""
    files = sorted(f for pattern in FORMATS[name] for f in REAL.glob(pattern))
    into.mkdir(parents=True)
    total, copy = 0, 0
    while total < target:
        for file in files:
            stem, dot, suffix = file.name.partition(".")
            shutil.copyfile(file, into / f"{stem}-{copy}{dot}{suffix}")
            total += file.stat().st_size
        copy += 1
    return total


def measure(folder: Path) -> dict:
    compiled()
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def load_rows(figure: str, runs: list[dict], what: str) -> list[dict]:
    """The two rows of a corpus's loads (`measure` runs): its median time and peak memory."""
    row = {"target": None, "met": True}
    return [
        {**row, "figure": f"{figure}: time", "unit": "s", "note": what,
         "median": statistics.median(r["seconds"] for r in runs)},
        {**row, "figure": f"{figure}: peak memory", "unit": "MB",
         "note": "resident high-water mark (VmHWM) less the size before the load",
         "median": statistics.median(r["mb"] for r in runs)},
    ]  # fmt: skip


def main(megabytes: int = TARGET_BYTES >> 20) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-formats-") as work:
        for name in FORMATS:
            folder = Path(work) / name
            size = folder_of(name, folder, megabytes << 20)
            runs = [measure(folder) for _ in range(RUNS)]
            what = (
                f"{size / 2**20:.0f} MB, {runs[0]['sessions']:,} sessions, "
                f"{runs[0]['calls']:,} calls, {runs[0]['blocks']:,} blocks; {RUNS} runs"
            )
            rows += load_rows(f"load {name} (real files copied to {megabytes} MB)", runs, what)
            shutil.rmtree(folder)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_formats")
    parser.add_argument("--megabytes", type=int, default=TARGET_BYTES >> 20)
    options = parser.parse_args()
    for row in main(options.megabytes):
        print(f"{row['figure']}: {row['median']:.3f} {row['unit']} ({row['note']})")
