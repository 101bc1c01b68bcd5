"""The context chart as a figure: `Session.context_figure()` and `%agent context --save`, checked
through matplotlib's own API (what is drawn where, labelled how), and the files it writes."""

from __future__ import annotations

import json
import re
import shlex
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from evo_magic.compact.policy import CompactPolicy
from evo_magic.extras import checkout, install_command
from evo_magic.meter.chart import before_tokens
from evo_magic.meter.data import MeterData
from evo_magic.meter.figure import COLUMN_WIDTH, X_LABEL, Y_LABEL
from evo_magic.meter.html import meter_html
from evo_magic.notebook.magics import AgentMagics
from evo_magic.session import Session
from evo_magic.strategies.summarise import Summarise

SURVEY = "Survey the project and keep notes."
AGAIN = "Now look again and double-check the notes against the code."
FOCUS = "the notes file and the TODOs"
LEGIBLE_POINTS = 6.0
"""The smallest text a figure printed at a paper's column width may have."""


@pytest.fixture
def session(workspace: Path) -> Iterator[Session]:
    """Two asks (an automatic compaction, C1) and a %compact (C2) on the offline model."""
    with Session(workspace, model="offline", policy=CompactPolicy(context_limit=12_000)) as s:
        s.ask(SURVEY)
        s.ask(AGAIN)
        s.compact(FOCUS)
        yield s


def bars(ax) -> tuple[list[Rectangle], list[Rectangle]]:
    """The solid bars (what each call sent) and the dashed outlines (its size before)."""
    rectangles = [p for p in ax.patches if isinstance(p, Rectangle)]
    return [r for r in rectangles if r.fill], [r for r in rectangles if not r.fill]


def middle(rectangle: Rectangle) -> float:
    return rectangle.get_x() + rectangle.get_width() / 2


def test_the_figure_draws_every_call_compaction_and_the_limit_in_tokens(session: Session):
    log = session.context_log
    data = MeterData.of_session(session, log)
    figure = session.context_figure()
    assert tuple(figure.get_size_inches())[0] == pytest.approx(COLUMN_WIDTH)
    (ax,) = figure.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == (X_LABEL, Y_LABEL)
    sent, ghosts = bars(ax)
    assert [round(middle(r)) for r in sent] == [call.call for call in log.calls]
    assert [r.get_height() for r in sent] == [call.tokens for call in log.calls]
    # What was removed before a call is an outline from the axis up to the size before, behind
    # the call's own bar: never stacked on it.
    removed = [call for call in log.calls if before_tokens(call) > call.tokens]
    assert removed, "the session had compactions before some calls"
    assert [(round(middle(r)), r.get_height()) for r in ghosts] == [
        (call.call, before_tokens(call)) for call in removed
    ]
    assert all(g.get_y() == 0 and g.get_linestyle() == "--" for g in ghosts)
    assert all(g.zorder < s.zorder for g in ghosts for s in sent)
    lines = [line for line in ax.get_lines() if isinstance(line, Line2D)]
    limit = [line for line in lines if list(line.get_ydata()) == [data.limit_tokens] * 2]
    assert len(limit) == 1 and ax.get_ylim()[1] >= data.limit_tokens
    full = [row for row in log.compactions if not row.micro]
    verticals = [line for line in lines if len(set(line.get_xdata())) == 1 and line not in limit]
    assert len(verticals) == len(full) == 2
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("C")] == ["C1", "C2"]
    assert f"limit 12,000 chars ≈ {data.limit_tokens:,} tokens" in texts
    (micro,) = [line for line in lines if line.get_marker() == "^"]
    assert len(micro.get_xdata()) == len([row for row in log.compactions if row.micro])
    assert ax.yaxis.get_major_formatter()(2_000, 0) == "2k"
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["sent", "before removal", "compaction", "micro"]


def test_the_figure_is_legible_at_a_column_width(session: Session):
    figure = session.context_figure()
    figure.draw_without_rendering()  # lays it out, as saving it does
    (ax,) = figure.axes
    texts = [*ax.texts, ax.xaxis.label, ax.yaxis.label, *figure.legends[0].get_texts()]
    texts += [*ax.get_xticklabels(), *ax.get_yticklabels()]
    assert all(t.get_fontsize() >= LEGIBLE_POINTS for t in texts if t.get_text())
    inside = figure.get_window_extent()
    for text in texts:
        if text.get_text():
            box = text.get_window_extent()
            assert inside.x0 - 1 <= box.x0 and box.x1 <= inside.x1 + 1, text.get_text()


@pytest.mark.parametrize(
    ("suffix", "magic"),
    [(".svg", b"<?xml"), (".png", b"\x89PNG\r\n\x1a\n"), (".pdf", b"%PDF-")],
)
def test_agent_context_save_writes_the_figure(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, magic: bytes
):
    shell = start_ipython() or InteractiveShell.instance()
    monkeypatch.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    shell.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
    try:
        with capture_output():
            shell.run_cell_magic("agent", "--offline", SURVEY)
        path = tmp_path / f"context{suffix}"
        with capture_output() as shown:
            shell.run_line_magic("agent", f"context --save {path}")
        assert f"context figure saved to {path}" in shown.stdout
        assert "context:" in shown.stdout, "the usual context report follows"
        data = path.read_bytes()
        assert data.startswith(magic)
        if suffix == ".png":  # 300 dpi at a column's width
            width = struct.unpack(">I", data[16:20])[0]
            assert width == pytest.approx(COLUMN_WIDTH * 300, abs=2)
        if suffix == ".svg":
            assert Y_LABEL in data.decode() and X_LABEL in data.decode()
        with pytest.raises(UsageError, match=r"must end with \.svg, \.png or \.pdf"):
            shell.run_line_magic("agent", f"context --save {tmp_path / 'context.jpg'}")
        with pytest.raises(UsageError, match="--save is for %agent context only"):
            shell.run_line_magic("agent", f"history --save {path}")
        magics = next(m for m in shell.configurables if isinstance(m, AgentMagics))
        assert magics.sessions["default"].context_log.calls
    finally:
        shell.run_line_magic("unload_ext", "evo_magic")
        shell.config.pop("AgentMagics", None)


def test_matplotlib_is_imported_only_for_a_figure(workspace: Path):
    code = (
        "import json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'evo_magic')\n"
        "shell.run_line_magic('config', \"AgentMagics.display_mode = 'plain'\")\n"
        "shell.run_cell_magic('agent', '--offline -q', 'Survey the project.')\n"
        "before = 'matplotlib' in sys.modules\n"
        "session = shell.find_magic('agent').__self__.sessions['default']\n"
        "session.context_figure()\n"
        "print(json.dumps([before, 'matplotlib' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=workspace
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True]


def test_the_meter_runs_in_a_plain_script(workspace: Path):
    """Every module of `evo_magic.meter` imports without IPython or ipywidgets, and a script
    gets the meter's text, HTML and widget state without them; matplotlib comes with a figure."""
    code = (
        "import json, pkgutil, sys, importlib\n"
        "import evo_magic.meter\n"
        "for module in pkgutil.iter_modules(evo_magic.meter.__path__):\n"
        "    importlib.import_module('evo_magic.meter.' + module.name)\n"
        "from evo_magic.meter.data import MeterData\n"
        "from evo_magic.meter.html import meter_html\n"
        "from evo_magic.meter.state import state_of\n"
        "from evo_magic.meter.text import meter_text\n"
        "from evo_magic.session import Session\n"
        "with Session('.', model='offline') as session:\n"
        "    session.ask('Survey the project.')\n"
        "    data = MeterData.of_session(session, session.context_log)\n"
        "    shown = [meter_text(data), meter_html(data), state_of(data)['model_calls']]\n"
        "    heavy = [m for m in ('IPython', 'ipywidgets', 'matplotlib') if m in sys.modules]\n"
        "    session.context_figure()\n"
        "print(json.dumps([shown, heavy, 'matplotlib' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=workspace
    )
    (text, page, calls), heavy, figured = json.loads(out.stdout.strip().splitlines()[-1])
    assert text.startswith("context meter · the whole session") and calls > 0
    assert "class='evo-chart'" in page
    assert heavy == [] and figured


INSTALL = r"python -m pip install (-e '[^']+\[notebooks\]'|'evo-magic\[notebooks\]')"
"""The command the message gives: into the editable checkout, or the package from the index."""


def test_saving_without_matplotlib_says_in_one_line_what_to_install(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    shell = start_ipython() or InteractiveShell.instance()
    monkeypatch.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    shell.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
    try:
        with capture_output():
            shell.run_cell_magic("agent", "--offline", SURVEY)
        for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
            monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
        path = tmp_path / "context.svg"
        with capture_output() as shown:
            shell.run_cell(f"%agent context --save {path}")
        assert "Traceback" not in shown.stdout + shown.stderr
        (line,) = shown.stderr.strip().splitlines()
        assert line.startswith("UsageError: %agent context --save: the context figure needs")
        assert "matplotlib, which the 'notebooks' extra installs" in line
        assert re.search(INSTALL + "$", line), line
        assert not path.exists()
    finally:
        shell.run_line_magic("unload_ext", "evo_magic")
        shell.config.pop("AgentMagics", None)


def test_the_install_command_works_from_where_the_user_is(tmp_path: Path):
    source = checkout()
    if source is None:
        assert install_command("notebooks") == "python -m pip install 'evo-magic[notebooks]'"
        return
    # An editable checkout (the quick start's `pip install -e .`): install into it, by `.`
    # from inside it and by its path from anywhere else.
    assert (source / "pyproject.toml").is_file()
    assert install_command("notebooks", source) == "python -m pip install -e '.[notebooks]'"
    elsewhere = install_command("notebooks", tmp_path)
    assert elsewhere == f"python -m pip install -e {shlex.quote(f'{source}[notebooks]')}"


class Broken:
    """A strategy that fails when asked to compact."""

    name = "broken"
    when = "on_request"

    def compact(self, messages, ctx):
        raise RuntimeError("out of ideas")


@pytest.fixture
def failed_then_compacted(workspace: Path) -> Iterator[Session]:
    """A %compact whose first strategy fails and the next succeeds: two compactions before
    one call (then an ask, so a call follows them)."""
    strategies = [Broken(), Summarise(when="on_request")]
    with Session(workspace, model="offline", strategies=strategies) as s:
        s.ask(SURVEY)
        s.compact()
        s.ask(AGAIN)
        yield s


def overlapping(boxes: list[tuple[str, float, float, float, float]]) -> list[tuple[str, str]]:
    """The pairs of labelled boxes (label, x0, y0, x1, y1) that overlap."""
    return [
        (a[0], b[0])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]


def test_labels_of_compactions_at_one_call_never_overprint_in_the_figure(
    failed_then_compacted: Session, tmp_path: Path
):
    rows = [r for r in failed_then_compacted.context_log.compactions if not r.micro]
    assert [(r.success, r.after_call) for r in rows] == [(False, rows[0].after_call)] + [
        (True, rows[0].after_call)
    ]
    figure = failed_then_compacted.context_figure()
    figure.savefig(tmp_path / "context.svg", format="svg")  # laid out and drawn, as saved
    (ax,) = figure.axes
    labels = [t for t in ax.texts if t.get_text() in ("failed", "C1")]
    assert sorted(t.get_text() for t in labels) == ["C1", "failed"]
    labels += [t for t in ax.texts if t.get_text().startswith("limit ")]  # nor over the limit's
    boxes = [(t.get_text(), *t.get_window_extent().extents) for t in labels]
    assert overlapping(boxes) == []
    assert "failed" in (tmp_path / "context.svg").read_text()


MARK = re.compile(
    r"<div class='evo-mark' data-kind='full'[^>]*style='position:absolute;left:([\d.-]+)px.*?"
    r"class='evo-mark-label' style='position:absolute;left:([\d.]+)px;top:([\d.]+)px;"
    r"width:([\d.]+)px;height:([\d.]+)px[^>]*>([^<]*)</div>"
)


def test_labels_of_compactions_at_one_call_never_overprint_in_the_meter(
    failed_then_compacted: Session,
):
    page = meter_html(
        MeterData.of_session(failed_then_compacted, failed_then_compacted.context_log)
    )
    boxes = []
    for left, inner, top, width, height, label in MARK.findall(page):
        x0, y0 = float(left) + float(inner), float(top)
        boxes.append((label, x0, y0, x0 + float(width), y0 + float(height)))
    assert sorted(box[0] for box in boxes) == ["C1", "failed"]
    assert overlapping(boxes) == []
