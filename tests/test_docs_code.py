"""Every ```python block of every docs page runs: a page's blocks in order, in one namespace,
offline (no key: the offline model), in a temporary folder that holds copies of the repository's
real Claude Code sessions (`claude-code-project/`) and Codex rollout (`codex-sessions/`), as the
pages say. ```python notest blocks are skipped (each says why beside it). The runner is ours
(`support.doc_blocks`, which says why)."""

from __future__ import annotations

import shutil
import sys
import traceback
import types
from pathlib import Path

import pytest
from support.doc_blocks import blocks

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
FIXTURES = ROOT / "tests" / "fixtures"
PAGES = sorted(DOCS.glob("*.md"))
SLOW = {
    "many-sessions.md",  # starts a sweep's process pool
    "experiments.md",  # runs the built-in suite twice: seconds on its own
}


def _prepared(folder: Path) -> None:
    shutil.copytree(FIXTURES / "real" / "claude-code-2.1", folder / "claude-code-project")
    shutil.copytree(FIXTURES / "codex", folder / "codex-sessions")


def run_page(page: Path) -> int:
    """Run the page's blocks in order in one namespace; the number run. A failure raises
    AssertionError naming the page and the line, with the traceback into the page."""
    # A module of its own, as a script has: a dataclass defined in a block looks its module up.
    module = types.ModuleType(f"docs_page_{page.stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    ran = 0
    try:
        for block in blocks(page):
            if not block.runs:
                continue
            try:
                exec(block.compiled(), module.__dict__)
            except Exception as exc:
                trace = "".join(traceback.format_exception(exc)[-4:])
                raise AssertionError(
                    f"{page.name}, the block at line {block.line}: "
                    f"{type(exc).__name__}: {exc}\n{trace}"
                ) from None
            ran += 1
    finally:
        del sys.modules[module.__name__]
    return ran


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, id=page.name, marks=[pytest.mark.slow] if page.name in SLOW else [])
        for page in PAGES
    ],
)
def test_the_code_of_each_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _prepared(tmp_path)
    run_page(page)
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def test_the_pages_have_code_that_runs():
    """The pages the tests run are the ones with code a reader copies: a page that lost its
    runnable blocks (all marked notest, or a fence typo) is noticed."""
    runnable = {page.name for page in PAGES if any(b.runs for b in blocks(page))}
    assert {
        "getting-started.md",
        "strategies.md",
        "caching-cost.md",
        "replay.md",
        "retention.md",
        "many-sessions.md",
        "transcripts.md",
        "recipes.md",
    } <= runnable


def test_a_failing_block_names_its_page_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nx = 1\n```\n\ntext\n\n```python notest\nnot run\n```\n\n"
        "```python\ny = x + 1\nraise ValueError(f'y is {y}')\n```\n",
        encoding="utf-8",
    )
    with pytest.raises(AssertionError) as failed:
        run_page(page)
    message = str(failed.value)
    assert message.startswith("page.md, the block at line 14: ValueError: y is 2")
    assert f'File "{page}", line 15' in message  # the traceback points into the page


def test_an_unclosed_fence_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="page.md:1: a code fence that is never closed"):
        blocks(page)
