"""Benchmark numbers live in one page, written by `python -m benchmarks.run --markdown
docs/benchmarks.md`; the README links to it instead of repeating them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).parent.parent


def benchmarks_run():
    """`benchmarks/run.py`, loaded from its file (the benchmarks are no installed package)."""
    spec = importlib.util.spec_from_file_location("benchmarks_run", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_holds_every_row_and_each_note_with_table_cells_escaped():
    rows = [
        {"figure": "load a | b", "median": 0.5, "unit": "s", "target": "< 1", "met": True},
        {
            "figure": "missed",
            "median": 3.0,
            "unit": "s",
            "target": "< 1",
            "met": False,
            "note": "why it missed",
        },  # fmt: skip
        {"figure": "context", "median": 12_345, "unit": "chars", "target": None, "met": True},
    ]
    page = benchmarks_run().markdown_page(rows, "evo_magic benchmarks · 2026-12-05 · here")
    lines = page.splitlines()
    assert lines[0] == "# Benchmarks" and "benchmarks.run --markdown" in lines[2]
    assert "| load a \\| b | 0.5 s | < 1 | yes |" in lines
    assert "| missed | 3 s | < 1 | NO |" in lines
    assert "| context | 12,345 chars | - | - |" in lines
    assert "- **missed**: why it missed" in lines


def test_the_readme_links_the_page_and_repeats_none_of_its_numbers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "(docs/benchmarks.md)" in readme
    assert "benchmarks.run --markdown docs/benchmarks.md" in page.splitlines()[2]
    figures = [
        line.split("|")[1].strip()
        for line in page.splitlines()
        if line.startswith("| ") and not line.startswith("| figure") and "---" not in line
    ]
    assert len(figures) > 50
    assert not [figure for figure in figures if f"{figure}  " in readme]  # no pasted table
