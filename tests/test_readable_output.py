"""What people read besides the meter: `%agent context`, the quiet footer, the glyphs, the
frames' missing values and column order, and the lab notebook's plots."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from IPython.utils.capture import capture_output

from evo_magic import CompactPolicy, Session, load_transcripts
from evo_magic.analysis import COMPACTION_COLUMNS, history_frame
from evo_magic.events import AskFinished
from evo_magic.notebook.cell import TEXT_WIDTH
from evo_magic.render import footer

SURVEY = "Survey the project and keep notes."
AGAIN = "Now look again and double-check the notes against the code."
LAB = Path(__file__).parents[1] / "notebooks" / "compaction_lab.ipynb"
# Glyphs the views may use besides ASCII: those of Windows Glyph List 4, which every common UI
# and monospace font covers, and the two check marks of the tool lines (DejaVu, Segoe UI
# Symbol, Apple Symbols, Noto). An "ⓘ" shows as a box in many fonts.
GLYPHS = set("·→←↑↓…—–×•●▲►▼◄“”‘’¦│≈✓✗")
pytestmark = pytest.mark.agent_config(offline=True, context_limit=12_000)


@pytest.fixture
def compacted(workspace: Path) -> Iterator[Session]:
    """A session that micro-compacted, compacted automatically and by hand."""
    with Session(workspace, model="offline", policy=CompactPolicy(context_limit=12_000)) as s:
        s.ask(SURVEY)
        s.ask(AGAIN)
        s.compact("the TODOs and the notes")
        yield s


# -- %agent context and the quiet footer ----------------------------------------------------


def test_agent_context_cuts_the_last_summary_on_a_word(ip):
    with capture_output():
        ip.run_cell_magic("agent", "", SURVEY)
        ip.run_cell_magic("agent", "", AGAIN)
    with capture_output() as out:
        ip.run_line_magic("agent", "context")
    summary = next(m for m in ip.configurables if type(m).__name__ == "AgentMagics")
    full = summary.sessions["default"].state.last_summary
    assert len(full) > 300, "the offline summary is long enough to be cut"
    shown = out.stdout.split("last summary: ", 1)[1].rstrip("\n")
    assert shown.endswith("…") and len(shown) <= 300
    kept = shown[:-1]
    assert full.startswith(kept)
    assert full[len(kept)].isspace() or not full[len(kept) - 1].isalnum()


def test_quiet_footer_wraps_between_words_in_a_terminal(ip):
    with capture_output() as out:
        ip.run_cell_magic("agent", "-q", SURVEY)
    finished = ip.user_ns["_agent"].events[-1]
    assert isinstance(finished, AskFinished)
    words = footer(finished, 0).split()
    lines = out.stdout.rstrip("\n").split("\n")
    assert len(lines) > 1, "the footer is longer than a line"
    assert all(len(line) <= TEXT_WIDTH for line in lines)
    assert lines[0].startswith("  · ") and all(line.startswith("    ") for line in lines[1:])
    assert " ".join(lines).replace("  · ", "", 1).split() == words  # no word cut in two


def test_quiet_footer_is_its_own_html_output_in_a_notebook(ip):
    ip.run_line_magic("config", "AgentMagics.display_mode = 'rich'")
    with capture_output() as out:
        ip.run_cell_magic("agent", "-q", SURVEY)
    assert "model calls, stop:" not in out.stdout  # not a stream, which wraps inside words
    footers = [o.data for o in out.outputs if "evo-magic-footer" in o.data.get("text/html", "")]
    assert len(footers) == 1
    assert "white-space:normal" in footers[0]["text/html"]
    assert "word-break:normal" in footers[0]["text/html"]
    assert "model calls, stop: end_turn" in footers[0]["text/plain"]


def test_views_use_only_glyphs_common_fonts_have(ip):
    ip.run_line_magic("config", "AgentMagics.display_mode = 'rich'")
    with capture_output() as out:
        ip.run_cell_magic("agent", "-t 2", SURVEY)  # stops at the turn limit: a notice
        ip.run_cell_magic("agent", "", AGAIN)
        ip.run_line_magic("compact", "focus=the notes")
        ip.run_line_magic("agent", "context")
    shown = out.stdout + "".join(
        value for o in out.outputs for value in o.data.values() if isinstance(value, str)
    )
    assert "note: " in shown and "evo-magic-meter" in shown
    strange = {ch for ch in shown if ord(ch) > 127} - GLYPHS
    # Text the agent or its tools wrote is theirs; only the views' own marks are checked.
    agent = json.dumps(ip.user_ns["_agent"].text, ensure_ascii=False)
    assert not {ch for ch in strange if ch not in agent}, strange


# -- frames -------------------------------------------------------------------------------------


def test_history_frame_shows_missing_values_one_way(workspace: Path):
    with Session(workspace, model="offline") as session:
        session.ask(SURVEY)
        frame = history_frame(session.messages)
    for shown in (repr(frame), frame.to_string(), frame._repr_html_()):
        assert "NaN" not in shown and ("<NA>" in shown or "&lt;NA&gt;" in shown)
    assert frame["tool_name"].isna().any() and frame["tool_name"].notna().any()
    assert list(frame.columns)[:6] == [
        "message_index",
        "role",
        "block_index",
        "block_type",
        "tool_name",
        "chars",
    ]


def test_transcript_frames_show_missing_values_one_way(compacted: Session):
    t = load_transcripts(compacted.directory)
    for frame in (t.blocks, t.calls, t.compactions):
        categories = [c for c in frame.columns if frame[c].dtype == "category"]
        assert categories
        assert "NaN" not in frame[categories].to_string()


def test_compactions_frame_shows_before_and_after_first(compacted: Session):
    t = load_transcripts(compacted.directory)
    with pd.option_context("display.max_columns", 20, "display.width", 200):
        page = t.compactions._repr_html_()
    headers = re.findall(r"<th>(\w+)</th>", page)
    shown = {"strategy", "trigger", "focus", "before_chars", "after_chars"}
    shown |= {"before_tokens", "after_tokens", "turn", "session_id"}
    assert shown <= set(headers), headers
    assert list(t.compactions.columns) == list(COMPACTION_COLUMNS)
    assert list(t.compactions["trigger"]) == ["auto", "user"]
    text = repr(t)
    assert "strategy, trigger, focus, before_tokens, after_tokens" in text
    assert "before_tokens" in t._repr_html_()


# -- the lab notebook ---------------------------------------------------------------------------


@pytest.mark.slow
def test_lab_plot_legends_cover_no_bar_and_no_line(tmp_path: Path, monkeypatch):
    """Run the lab's code (Agg backend) and check every legend lies clear of the bars and the
    lines of its plot."""
    import nbformat

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: figures.append(plt.gcf()))

    def mkdtemp(prefix: str = "") -> str:
        (tmp_path / prefix).mkdir()
        return str(tmp_path / prefix)

    monkeypatch.setattr("tempfile.mkdtemp", mkdtemp)
    monkeypatch.delenv("CLAUDE_CODE_PROJECTS", raising=False)
    namespace: dict = {"display": lambda *a, **k: None}
    for cell in nbformat.read(LAB, as_version=4).cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, str(LAB), "exec"), namespace)  # noqa: S102
    legends = 0
    for figure in figures:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for ax in figure.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            legends += 1
            box = legend.get_window_extent(renderer)
            bars = [p.get_window_extent(renderer) for p in ax.patches]
            assert not [b for b in bars if b.width and b.height and box.overlaps(b)]
            for line in ax.get_lines():
                points = ax.transData.transform(line.get_xydata())
                assert not [p for p in points if box.contains(*p)], line.get_label()
        plt.close(figure)
    assert figures and legends, "the lab draws plots with a legend"
