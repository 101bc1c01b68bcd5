"""Folders of real Claude Code sessions at 1x, 10x and 100x, for the scaling benchmark.

Each copy of the sample folder keeps its layout under its own `copy-NNNN/` folder, every id
shaped like a UUID (session ids, record uuids, parent links) mapped to a new one, the same
mapping throughout one copy: the copies are distinct sessions to the loader, linked within
themselves as the originals were. Nothing of the samples is shipped with the project; the
folder to copy is given on the command line (or by `EVO_MAGIC_SAMPLES` to the benchmark).

    python -m benchmarks.scale_samples SAMPLES TARGET --copies 10
"""

from __future__ import annotations

import argparse
import re
import uuid
from pathlib import Path

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def sample_files(samples: Path) -> list[tuple[Path, str]]:
    """Every `.jsonl` file under `samples`: its path relative to it, and its text."""
    files = sorted(samples.rglob("*.jsonl"))
    if not files:
        raise ValueError(f"no .jsonl session file under {samples}")
    return [(path.relative_to(samples), path.read_text(encoding="utf-8")) for path in files]


def renamed(text: str, mapping: dict[str, str]) -> str:
    """`text` with every UUID replaced by its new one (a new one made for an unseen UUID)."""
    return UUID.sub(lambda m: mapping.setdefault(m.group(0), str(uuid.uuid4())), text)


def build(samples: Path, target: Path, copies: int) -> int:
    """`copies` copies of the sessions under `samples` into `target` (new ids each); returns
    the bytes written. A target already holding that many copies is kept as it is."""
    marker = target / f".copies-{copies}"
    if marker.exists():
        return int(marker.read_text())
    files = sample_files(samples)
    written = 0
    for number in range(copies):
        mapping: dict[str, str] = {}
        for relative, text in files:
            path = target / f"copy-{number:04d}" / renamed(str(relative), mapping)
            path.parent.mkdir(parents=True, exist_ok=True)
            written += path.write_text(renamed(text, mapping), encoding="utf-8")
    marker.write_text(str(written))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path, help="a folder of Claude Code .jsonl sessions")
    parser.add_argument("target", type=Path, help="where the copies go (made if missing)")
    parser.add_argument("--copies", type=int, default=10)
    options = parser.parse_args(argv)
    written = build(options.samples, options.target, options.copies)
    print(f"{options.copies} copies, {written / 1e6:,.1f} MB in {options.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
