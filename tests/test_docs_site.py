"""The docs site builds strictly (every link and anchor resolves, every page is in the nav),
and every generated table in the README and the pages is the one the code makes now."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from evo_magic.doc_tables import TABLES, expand

ROOT = Path(__file__).parent.parent
MARKED = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.slow  # about ten seconds: mkdocstrings reads the whole package
def test_the_site_builds_strictly(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    api = (tmp_path / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="evo_magic.session.Session"' in api  # the reference was made from docstrings
    strategies = (tmp_path / "strategies" / "index.html").read_text(encoding="utf-8")
    assert "keep_recent" in strategies  # the hook filled the tables
    changelog = (tmp_path / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog  # CHANGELOG.md included, not copied
    assert not (tmp_path / "hooks.py").exists()  # the build hook is not published
    many = (tmp_path / "many-sessions" / "index.html").read_text(encoding="utf-8")
    notest = many[many.index("On Dask (this block") : many.index("a local Dask cluster")]
    assert '<div class="highlight"><pre>' in notest and "notest" not in many  # shown as code


@pytest.mark.parametrize("path", MARKED, ids=lambda p: p.name)
def test_each_generated_table_is_current(path):
    text = path.read_text(encoding="utf-8")
    # Changed code: python -m evo_magic.doc_tables README.md docs/*.md
    assert expand(text) == text, f"python -m evo_magic.doc_tables {path.relative_to(ROOT)}"


def test_every_table_is_used_and_each_once():
    used: dict[str, list[str]] = {}
    for path in MARKED:
        for name in re.findall(r"<!-- table: ([a-z-]+) -->", path.read_text(encoding="utf-8")):
            used.setdefault(name, []).append(path.name)
    assert set(used) == set(TABLES)
    assert used["settings"] == ["notebook.md"] and used["catalog"] == ["caching-cost.md"]
    assert used["strategy-parameters"] == ["strategies.md"] and used["api"] == ["api.md"]


def test_the_api_page_documents_every_public_name():
    import evo_magic

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in evo_magic.__all__:
        assert re.search(rf"^::: evo_magic[\w.]*\.{name}$", page, re.M), name


def test_an_unknown_table_is_refused_in_one_line():
    with pytest.raises(ValueError, match="unknown table 'prizes'; known: magics, settings"):
        expand("<!-- table: prizes -->\nold\n<!-- /table -->\n")


def test_expand_rewrites_only_inside_the_markers():
    text = "before\n<!-- table: magics -->\nstale\n<!-- /table -->\nafter\n"
    made = expand(text)
    assert made.startswith("before\n<!-- table: magics -->\n| magic | what it does |")
    assert made.endswith("<!-- /table -->\nafter\n") and "stale" not in made
    assert "| `%agent pins` |" in made
    assert expand(made) == made
