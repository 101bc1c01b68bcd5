"""The README is short, and what it states is what the code and CI do: the commands it shows
are the ones CI runs and the extras pyproject declares, the magics it names exist, its links
lead to files that exist, and its Python example runs (on the offline model and the repository's
Claude Code fixtures in place of the paths a reader puts). Its table of magics is generated
(tests/test_docs_site.py checks every generated table)."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
TEST_COMMAND = "python -m pip install -e '.[test]' && python -m pytest"


def test_the_readme_fits_on_a_few_screens():
    assert len(README.splitlines()) <= 250


def test_the_test_command_is_the_one_ci_runs():
    assert f"\n{TEST_COMMAND}\n" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().splitlines()[-1] == TEST_COMMAND


def test_every_install_command_names_an_extra_pyproject_declares():
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    pages = [README, *(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))]
    named = {m for text in pages for m in re.findall(r"pip install -e '\.\[(\w+)\]'", text)}
    assert named and named <= extras, named - extras
    for text in pages:  # the package is not on the index: from a checkout, -e .
        assert "evo-magic[" not in text and "pip install evo" not in text


def test_the_quick_start_command_runs_a_module_that_exists():
    assert "python -m pip install -e . && python -m evo_magic.quickstart" in README
    assert (ROOT / "evo_magic" / "quickstart.py").is_file()


def test_every_magic_the_readme_names_exists():
    from evo_magic.notebook.magics import AgentMagics
    from evo_magic.notebook.subcommands import SUBCOMMANDS

    named = set(re.findall(r"(?<!%)%agent (\w+)", README))
    assert {"context", "strategies"} <= named
    assert named <= set(SUBCOMMANDS), named - set(SUBCOMMANDS)
    line_magics = AgentMagics.magics["line"]
    assert "%compact" in README and "compact" in line_magics
    assert "%%agent" in README and "agent" in AgentMagics.magics["cell"]


def test_every_relative_link_leads_to_a_file():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert "docs/benchmarks.md" in local and "docs/images/meter.png" in local
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_the_python_example_runs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    shutil.copytree(ROOT / "tests" / "fixtures" / "real" / "claude-code-2.1", tmp_path / "cc")
    from evo_magic.demo import make_demo_workspace

    project = make_demo_workspace(tmp_path / "project")
    assert '"path/to/project"' in code and '"~/.claude/projects/my-project"' in code
    code = code.replace('"path/to/project"', repr(str(project)))
    code = code.replace('"~/.claude/projects/my-project"', repr(str(tmp_path / "cc")))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    shown = eval(code.strip().splitlines()[-1], namespace)  # the frame the last line shows
    assert list(shown.columns) == ["strategy", "cost_usd", "peak_context_tokens", "compactions"]
    assert namespace["session"].state.compact_count == 1


def test_the_columns_the_replay_page_names_are_the_frames_columns():
    """`r.totals` was once documented with a `tokens` column it never had (a KeyError in a
    first analysis): the columns the replay page lists are those replay makes."""
    from evo_magic import replay

    page = (ROOT / "docs" / "replay.md").read_text(encoding="utf-8")
    calls_text = page[page.index("r.calls    #") + 12 : page.index("r.totals   #")]
    totals_text = page[page.index("r.totals   #") + 12 : page.index("r.plot()")]
    r = replay(ROOT / "tests" / "fixtures" / "real" / "claude-code-2.1", strategies={"none": []})
    for text, frame in ((calls_text, r.calls), (totals_text, r.totals)):
        named = set(re.findall(r"\b([a-z]+_[a-z_]+|calls|tokens|compactions|breakpoints)\b", text))
        named -= {"per_strategy"}
        assert named and named <= set(frame.columns), named - set(frame.columns)
