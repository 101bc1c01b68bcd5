"""Benchmark: loading OpenHands conversation folders and Gemini CLI JSON-lines chats, the formats
read from many small files or from a log folded in Python.

As `bench_formats` does for the whole-document formats: the fixtures under `tests/fixtures/real/`
are copied into one folder until it holds about `TARGET_BYTES` (a conversation folder copied
whole, under a name of its own: its files stay one session; copies keep their state's `id`), and
a fresh interpreter loads it (`bench_formats.measure`: wall time, peak resident memory). The
Gemini CLI log is one written to its source's record shapes (no public one was found).

    python -m benchmarks.bench_folders
    python -m benchmarks.bench_folders --megabytes 10
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_formats import REAL, RUNS, TARGET_BYTES, load_rows, measure


def conversation_folders(into: Path, target: int) -> int:
    """Copies of the real conversation folders in `into` up to `target` bytes; bytes copied."""
    folders = sorted(p for p in (REAL / "openhands-conversations").iterdir() if p.is_dir())
    total, copy = 0, 0
    while total < target:
        for folder in folders:
            shutil.copytree(folder, into / f"{folder.name}-{copy}")
            total += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        copy += 1
    return total


def gemini_logs(into: Path, target: int) -> int:
    """Copies of the Gemini CLI log in `into` up to `target` bytes; bytes copied."""
    (log,) = (REAL / "gemini-cli-jsonl").glob("*.jsonl")
    into.mkdir(parents=True)
    total, copy = 0, 0
    while total < target:
        shutil.copyfile(log, into / f"{log.stem}-{copy}.jsonl")
        total += log.stat().st_size
        copy += 1
    return total


CORPORA: dict[str, tuple[Callable[[Path, int], int], str]] = {
    "openhands conversation folders": (conversation_folders, "real folders"),
    "gemini_cli JSON lines": (gemini_logs, "a written log"),
}


def main(megabytes: int = TARGET_BYTES >> 20) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-folders-") as work:
        for name, (make, what_copied) in CORPORA.items():
            folder = Path(work) / name.replace(" ", "-")
            size = make(folder, megabytes << 20)
            runs = [measure(folder) for _ in range(RUNS)]
            what = (
                f"{size / 2**20:.0f} MB, {runs[0]['calls']:,} calls, "
                f"{runs[0]['blocks']:,} blocks; {RUNS} runs"
            )
            rows += load_rows(f"load {name} ({what_copied} copied to {megabytes} MB)", runs, what)
            shutil.rmtree(folder)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_folders")
    parser.add_argument("--megabytes", type=int, default=TARGET_BYTES >> 20)
    options = parser.parse_args()
    for row in main(options.megabytes):
        print(f"{row['figure']}: {row['median']:.3f} {row['unit']} ({row['note']})")
