"""One house style for every figure (`evo_magic.plot_style`): the context figure, `Replay.plot`
and `Retention.frontier` draw in its font and sizes, label every axis and legend in words, take
their colours from its palette, and leave the user's matplotlib settings as they were."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from evo_magic import Session, replay, retention  # noqa: E402
from evo_magic.demo import make_demo_workspace  # noqa: E402
from evo_magic.plot_style import (  # noqa: E402
    COLOURS,
    SCREEN_WIDTH,
    SERIES,
    SMALL,
    house_style,
    sizes,
    words,
)

FIXTURE = Path(__file__).parent / "fixtures" / "real" / "claude-code-2.1"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An offline session with a compaction and micro-compactions, and its transcripts."""
    root = tmp_path_factory.mktemp("style")
    workspace = make_demo_workspace(root / "work")
    with Session(workspace, model="offline", context_limit=12_000) as session:
        session.ask("Survey this project: what does it do, and where are the TODOs?")
        session.ask("Now look again and double-check the notes against the code.")
    return session


def texts_of(figure) -> list:
    """Every text a reader sees in `figure`: axis labels, titles, ticks, legends, annotations."""
    found = [t for t in figure.findobj(matplotlib.text.Text) if t.get_text().strip()]
    assert found
    return found


def in_words(figure) -> None:
    """No axis label, title or legend entry is a raw column name (snake_case)."""
    for ax in figure.axes:
        shown = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        legend = ax.get_legend()
        shown += [t.get_text() for t in legend.get_texts()] if legend else []
        for text in shown:
            assert not re.search(r"\b[a-z]+_[a-z_]+\b", text), text


def test_words_name_columns_for_a_reader():
    assert words("cost_usd") == "Cost (USD)"
    assert words("context_tokens") == "Context sent (tokens)"
    assert words("peak_context_tokens") == "Peak context tokens"
    assert words("summary_cost_usd") == "Cost of the summaries (USD)"


def test_sizes_grow_with_the_width_and_never_fall_under_the_smallest():
    assert sizes(1.0).small == SMALL and sizes(6.8).small == 2 * SMALL
    assert sizes(SCREEN_WIDTH).label == pytest.approx(11.25)


def test_the_house_style_leaves_the_users_settings_as_they_were():
    before = dict(matplotlib.rcParams)
    with house_style():
        assert matplotlib.rcParams["axes.spines.top"] is False
        assert matplotlib.rcParams["font.sans-serif"][0] == "DejaVu Sans"
    assert dict(matplotlib.rcParams) == before


def test_the_context_figure_is_in_the_house_style(recorded):
    figure = recorded.context_figure()
    for text in texts_of(figure):
        assert text.get_fontfamily() == ["sans-serif"] and text.get_fontsize() >= SMALL
        assert text.get_fontname() == "DejaVu Sans"
    (ax,) = figure.axes
    bars = {matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches if p.get_fill()}
    assert bars <= {COLOURS["sent"], COLOURS["sent_earlier"]} and bars
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    in_words(figure)


def test_replay_plot_is_in_the_house_style(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "cc")
    r = replay(tmp_path / "cc", {"recorded": "recorded", "none": [], "default": None})
    figure = r.plot()
    left, right = figure.axes
    colours = [matplotlib.colors.to_hex(line.get_color()) for line in left.get_lines()]
    assert colours == list(SERIES[:3])  # one series colour per strategy, in order
    assert left.xaxis.label.get_fontsize() == sizes(SCREEN_WIDTH).label
    assert right.get_xlabel() == "Cost (USD)" and right.get_title() == "Total cost"
    for text in texts_of(figure):
        assert text.get_fontname() == "DejaVu Sans"
    in_words(figure)


def test_the_frontier_is_in_the_house_style(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "cc")
    rt = retention(tmp_path / "cc", {"none": [], "default": None}, model="claude-sonnet-4-5")
    ax = rt.frontier()
    assert ax.get_title() == "What each strategy costs and keeps"
    assert ax.xaxis.label.get_fontsize() == sizes(SCREEN_WIDTH).label
    assert [t.get_fontname() for t in ax.texts] == ["DejaVu Sans"] * len(ax.texts)
    in_words(ax.figure)


def test_the_transcript_analysis_notebooks_figures_speak_words(tmp_path, monkeypatch):
    """The notebook's figures, drawn by running its code cells in this process: every legend
    and axis in words, and the limit line labelled with its value."""
    import json

    import matplotlib.pyplot as plt

    path = Path(__file__).parent.parent / "notebooks" / "transcript_analysis.ipynb"
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plt, "show", lambda: None)  # keep the figures to look at them
    plt.close("all")
    namespace: dict = {"display": print}
    for cell in cells:
        exec(compile("".join(cell["source"]), str(path), "exec"), namespace)
    figures = [plt.figure(n) for n in plt.get_fignums()]
    assert len(figures) == 2
    for figure in figures:
        in_words(figure)
    (context,) = figures[1].axes
    legend = [t.get_text() for t in context.get_legend().get_texts()]
    assert legend == [
        "before micro-compaction",
        "sent to the model",
        "limit: full compaction above 12,000 characters",
    ]
    plt.close("all")


def test_the_new_measures_figures_are_in_the_house_style_and_in_words(tmp_path):
    """after_compaction's figure and an experiment's frontier: words on every axis, the house
    style's spines and tick sizes."""
    import warnings

    from evo_magic import after_compaction, experiment, tasks

    real = Path(__file__).parent / "fixtures" / "real" / "claude-code-compaction"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's partial usage is said at load
        figures = [after_compaction(real).plot()]
    suite = [t for t in tasks.builtin() if t.name == "fix-test"]
    x = experiment(suite, {"seed": "default"}, replicates=1, workers=1, out=tmp_path / "x")
    figures.append(x.frontier())
    for figure in figures:
        in_words(figure)
        for ax in figure.axes:
            assert not ax.spines["top"].get_visible() and ax.get_xlabel() and ax.get_ylabel()
            tick = ax.get_yticklabels()[0].get_fontsize()
            assert tick == pytest.approx(sizes(SCREEN_WIDTH).small)
