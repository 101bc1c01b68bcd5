"""A small sample project for the quick start, the example notebooks and the benchmarks."""

from __future__ import annotations

from pathlib import Path

INVENTORY = '''\
"""Inventory of a small lab: samples, where they are stored, and when they expire."""

import csv
from dataclasses import dataclass
from datetime import date


@dataclass
class Sample:
    sample_id: str
    kind: str
    freezer: str
    expires: date


def load(path: str) -> list[Sample]:
    """Read samples from a CSV file with columns sample_id, kind, freezer, expires."""
    with open(path, newline="") as f:
        return [
            Sample(r["sample_id"], r["kind"], r["freezer"], date.fromisoformat(r["expires"]))
            for r in csv.DictReader(f)
        ]


def expired(samples: list[Sample], today: date) -> list[Sample]:
    # TODO: samples expiring today should count as expired too
    return [s for s in samples if s.expires < today]


def by_freezer(samples: list[Sample]) -> dict[str, list[Sample]]:
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.freezer, []).append(sample)
    return groups


class Report:
    """A plain-text report of what to throw away."""

    def __init__(self, samples: list[Sample]):
        self.samples = samples

    def render(self, today: date) -> str:
        # TODO: group the report by freezer
        lines = [f"{s.sample_id} {s.kind} ({s.freezer})" for s in expired(self.samples, today)]
        return "\\n".join(lines) or "nothing expired"
'''

README = """\
# lab-inventory

Keeps track of the samples in the lab's freezers and reports the expired ones.

- `inventory.py`: loading, expiry and the report
- `samples.csv`: the current inventory

Known issues: see the TODOs in the code.
"""

KINDS = ("plasma", "serum", "dna", "rna", "tissue", "buffer")


def samples_csv(rows: int) -> str:
    """A deterministic CSV of `rows` samples (about 45 characters per row)."""
    lines = ["sample_id,kind,freezer,expires"]
    for n in range(rows):
        month = n % 12 + 1
        day = n % 27 + 1
        lines.append(f"S{n:05d},{KINDS[n % len(KINDS)]},F{n % 4 + 1},2026-{month:02d}-{day:02d}")
    return "\n".join(lines) + "\n"


def make_demo_workspace(path: str | Path, rows: int = 300) -> Path:
    """Create (or refresh) the sample project in `path` and return it."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "inventory.py").write_text(INVENTORY, encoding="utf-8")
    (root / "README.md").write_text(README, encoding="utf-8")
    (root / "samples.csv").write_text(samples_csv(rows), encoding="utf-8")
    return root
