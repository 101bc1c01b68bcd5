"""The quick start in a real JupyterLab driven by headless Chromium, as a user runs it and as
it looks when reopened without the kernel that ran it.

The writer opens the notebook, runs all cells, sees the agent's tool lines, footers and
meters, saves and shuts the kernel down. Then the notebook is reopened twice: in the same
JupyterLab, which starts a fresh kernel (one that never made the meters' widgets), and in a
JupyterLab with no kernel for it at all. Every time, every meter must show its HTML with the
numbers of its own cell (its context before and after, its compactions and no other cell's),
a chart with its axes, its limit and a mark for every compaction so far, and no "Error
displaying widget"; clicking a compaction opens its summary and focus. Last, a colleague opens
the file in their own JupyterLab, where it is untrusted and its HTML sanitised: the meters
must read the same. Screenshots go to the
folder of the `screenshots` fixture ($EVO_MAGIC_SCREENSHOTS, else under pytest's temporary
directory); `SHOTS` says what each one shows.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from lab_harness import (
    REPO,
    LabHome,
    LabServer,
    RunningLab,
    jupyterlab,
)
from playwright.sync_api import Locator, Page, expect

from evo_magic.notebook.magics import parse_compact_line

QUICKSTART = REPO / "notebooks" / "quickstart.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TOOLS = {"bash", "read_file", "write_file", "edit_file", "compact"}
CONTEXT_NUMBERS = re.compile(r"context:? (\d+) (?:messages?|msgs?), ([\d,]+) chars")
SHOTS = {
    "1-run-all-first-agent-cell.png": "the first %%agent cell after Run All: its meter (this "
    "cell's calls, micro-compactions only), the streamed text, tool lines (one opened), footer",
    "2-run-all-compact-meter.png": "the %compact cell's meter after Run All: C2 with its "
    "focus, the chart of the session so far with C2 at its right edge",
    "3-reopened-with-a-fresh-kernel.png": "the notebook reopened with a new kernel: every "
    "meter is static HTML, no widget error",
    "4-reopened-without-kernel.png": "the notebook reopened in a JupyterLab with no kernel "
    "for it (No Kernel): the last %%agent cell's meter",
    "5-meter-<n>-of-cell-<i>.png": "each meter alone, reopened without a kernel",
    "6-compaction-opened.png": "the second %%agent cell's meter with C1 clicked open: its "
    "summary, focus and what it replaced (the README's image)",
    "7-manual-compaction-opened.png": "the %compact cell's meter with C2 clicked open: its "
    "focus and summary",
    "8-untrusted-meter.png": "the second %%agent cell's meter in a colleague's JupyterLab, "
    "where the notebook is untrusted and its HTML sanitised: the same chart and numbers",
    "9-summary-being-edited.png": "%compact --edit: the proposed summary in its text area, "
    "edited, with Apply and Cancel",
    "10-summary-applied.png": "the same cell after Apply: the record of the applied text",
    "11-agent-summaries.png": "%agent summaries after it: the edited summary, its strategy",
}
"""What each screenshot shows."""


# -- fixtures ------------------------------------------------------------------------------


pytestmark = pytest.mark.slow  # a JupyterLab server and headless Chromium


@dataclass
class Plan:
    """Which cells of the notebook do what: indexes into all cells (markdown included)."""

    cells: int
    code: list[int]
    agent: list[int]
    compact: list[int]
    context: list[int]

    @property
    def meters(self) -> list[int]:
        return sorted(self.agent + self.compact + self.context)

    @classmethod
    def of(cls, nb: nbformat.NotebookNode) -> Plan:
        def starting(prefix: str) -> list[int]:
            return [i for i, c in enumerate(nb.cells) if c.source.lstrip().startswith(prefix)]

        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        return cls(
            len(nb.cells),
            code,
            starting("%%agent"),
            starting("%compact"),
            starting("%agent context"),
        )


@pytest.mark.timeout(300)
def test_quickstart_runs_in_jupyterlab_and_reopens_without_its_kernel(
    lab_home: LabHome, page: Page, screenshots: Path
):
    notebook = lab_home.root / QUICKSTART.name
    shutil.copyfile(QUICKSTART, notebook)
    original = nbformat.read(notebook, as_version=4)
    plan, nb_kernel = Plan.of(original), original.metadata.kernelspec.name
    assert plan.agent and plan.compact and plan.context, "the quick start shows every meter kind"

    with jupyterlab(lab_home) as server:
        open_notebook(page, server, notebook.name, plan)
        wait_for_kernel(page, server, nb_kernel)
        menu(page, "Run", "runmenu:run-all")
        wait_until_all_ran(page, plan)
        check_live_outputs(page, plan, notebook)
        cell(page, plan.agent[0]).screenshot(path=screenshots / "1-run-all-first-agent-cell.png")
        meter(page, plan.compact[0]).screenshot(path=screenshots / "2-run-all-compact-meter.png")
        save(page)
        menu(page, "Kernel", "kernelmenu:shutdown")
        expect(page.locator("[data-jp-item-name=kernelName]")).to_have_text("No Kernel")
        assert server.api("kernels") == []
        check_saved(notebook, plan)

        # Back to the notebook later: JupyterLab starts a fresh kernel, which has none of the
        # first kernel's widget models (where "Error displaying widget" came from).
        page.reload()
        expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(plan.cells)
        wait_for_kernel(page, server, nb_kernel)
        check_reopened(page, plan, notebook)
        page.screenshot(path=screenshots / "3-reopened-with-a-fresh-kernel.png")

    # A reader whose JupyterLab has no kernel for the notebook at all.
    with jupyterlab(lab_home, kernels=False) as reader:
        open_without_kernel(page, reader, notebook.name, plan)
        check_reopened(page, plan, notebook)
        meter(page, plan.agent[-1]).scroll_into_view_if_needed()
        page.screenshot(path=screenshots / "4-reopened-without-kernel.png")
        for n, index in enumerate(plan.meters, start=1):
            meter(page, index).screenshot(path=screenshots / f"5-meter-{n}-of-cell-{index}.png")
        check_opening_compactions(page, plan, notebook, screenshots)

    # A colleague who got the file: their own profile, where the notebook is not trusted, so
    # JupyterLab sanitises its HTML (no SVG, no <style>, no data-* attributes).
    colleague = LabHome(lab_home.base.parent / "colleague")
    colleague.prepare()
    shutil.copyfile(notebook, colleague.root / notebook.name)
    with jupyterlab(colleague, kernels=False) as server:
        open_without_kernel(page, server, notebook.name, plan)
        check_untrusted(page, plan)
        meter(page, plan.agent[1]).scroll_into_view_if_needed()
        meter(page, plan.agent[1]).screenshot(path=screenshots / "8-untrusted-meter.png")
    print(f"screenshots: {screenshots}")
    for name, what in SHOTS.items():
        print(f"  {name}: {what}")


EDITED = "EDITED IN THE BROWSER: inventory.py has the TODOs; the notes are in notes/."
EDIT_CELLS = [
    "import tempfile\n"
    "from pathlib import Path\n"
    "from evo_magic.demo import make_demo_workspace\n"
    'workspace = make_demo_workspace(Path(tempfile.mkdtemp(prefix="evo-magic-edit-")))\n'
    "%load_ext evo_magic\n"
    "%config AgentMagics.workspace = str(workspace)",
    "%%agent\nSurvey this project: what does it do, and where are the TODOs?",
    "%compact --edit focus=the TODOs",
    "%agent summaries",
    'session = get_ipython().find_magic("agent").__self__.sessions["default"]\n'
    'print(session.messages[0]["content"][0]["text"])',
]
"""A notebook to edit a summary in: run, propose (cell 2), then cells 3 and 4 are run again
after Apply to show the summaries and the history."""


@pytest.mark.timeout(300)
def test_a_summary_is_edited_in_a_text_area_and_applied(
    running_lab: RunningLab, page: Page, screenshots: Path
):
    with run_cells(running_lab, page, "edit-summary.ipynb", EDIT_CELLS):
        editor = cell(page, 2).locator(".evo-summary-editor")
        expect(editor).to_contain_text("Proposed summary (summarise; focus “the TODOs”)")
        expect(editor).to_contain_text("Nothing has changed yet. Edit it, then Apply.")
        text = editor.locator("textarea")
        expect(text).to_have_value(re.compile(r"\S"))  # the summariser's proposal
        proposed = text.input_value()
        expect(cell(page, 4).locator(".jp-OutputArea-output")).not_to_contain_text(proposed)
        text.fill(EDITED)
        cell(page, 2).screenshot(path=screenshots / "9-summary-being-edited.png")
        editor.get_by_role("button", name="Apply").click()
        record = cell(page, 2).locator(".evo-summary-record")
        expect(record).to_contain_text("Applied the edited summary: compaction (user)")
        expect(record.locator(".evo-summary-text")).to_have_text(EDITED)
        expect(cell(page, 2).locator(".evo-summary-editor")).to_have_count(0)
        cell(page, 2).screenshot(path=screenshots / "10-summary-applied.png")
        for index in (3, 4):  # run again, now that the summary is applied
            cell(page, index).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
        history = cell(page, 4).locator(".jp-OutputArea-output")
        expect(history).to_contain_text(EDITED)
        expect(history).to_contain_text("Focus to preserve next: the TODOs")
        expect(history).not_to_contain_text(proposed)
        summaries = cell(page, 3).locator(".evo-applied-summary")
        expect(summaries).to_have_count(1)
        expect(summaries).to_contain_text("summarise (user) · focus “the TODOs” · edited")
        expect(summaries.locator(".evo-summary-text")).to_have_text(EDITED)
        cell(page, 3).screenshot(path=screenshots / "11-agent-summaries.png")
    print(f"screenshots: {screenshots}")


# -- steps ---------------------------------------------------------------------------------


@contextmanager
def run_cells(lab: RunningLab, page: Page, name: str, cells: list[str]) -> Iterator[Plan]:
    """A notebook of `cells` (code) written under the lab's root as `name`, opened in the
    running JupyterLab on a python3 kernel of its own and run whole (the kernel ends with the
    server)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.home.root / name)
    plan = Plan.of(nb)
    # A workspace of its own: the server restores a workspace's open notebooks, and another
    # test's notebook open beside this one would add its cells to the page's.
    page.goto(lab.server.url(f"lab/workspaces/{Path(name).stem}/tree/{name}"))
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(plan.cells)
    wait_for_kernel(page, lab.server, "python3")
    menu(page, "Run", "runmenu:run-all")
    wait_until_all_ran(page, plan)
    yield plan


def open_notebook(page: Page, server: LabServer, name: str, plan: Plan) -> None:
    page.goto(server.url(f"lab/tree/{name}"))
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(plan.cells)


def open_without_kernel(page: Page, server: LabServer, name: str, plan: Plan) -> None:
    """Open the notebook in a JupyterLab that has no kernel for it, choosing "No Kernel"."""
    open_notebook(page, server, name, plan)
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Select Kernel")
    dialog.locator("select").select_option(label="No Kernel")
    dialog.locator(".jp-mod-accept").click()
    expect(page.locator("[data-jp-item-name=kernelName]")).to_have_text("No Kernel")
    assert server.api("kernels") == []


def wait_for_kernel(page: Page, server: LabServer, name: str) -> None:
    """The notebook's kernel is connected and idle (before that the indicator says idle too,
    with "No Kernel")."""
    spec = server.api("kernelspecs")["kernelspecs"][name]["spec"]
    expect(page.locator("[data-jp-item-name=kernelName]")).to_have_text(spec["display_name"])
    expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute("data-status", "idle")


def menu(page: Page, title: str, command: str) -> None:
    """Click a main-menu entry, as a user does: the menu, then the item of `command`."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{title}$")).click()
    page.locator(f".lm-Menu-item[data-command='{command}']").click()


def wait_until_all_ran(page: Page, plan: Plan) -> None:
    """Every code cell has its execution number (a running or queued one shows `[*]`)."""
    for index in plan.code:
        ran = cell(page, index).locator(".jp-InputArea-prompt", has_text=re.compile(r"^\[\d+\]:$"))
        failed = page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        )
        expect(ran.or_(failed).first).to_be_visible(timeout=120_000)
        assert not failed.count(), f"a cell failed: {failed.first.inner_text()[:2000]}"
    expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute("data-status", "idle")


def save(page: Page) -> None:
    tab = page.locator(".lm-TabBar-tab.jp-mod-current")
    expect(tab).to_have_class(re.compile(r"\bjp-mod-dirty\b"))
    menu(page, "File", "docmanager:save")
    expect(tab).not_to_have_class(re.compile(r"\bjp-mod-dirty\b"))


def check_saved(notebook: Path, plan: Plan) -> None:
    """The file holds the run: execution counts, no error, every meter as HTML and text only."""
    saved = nbformat.read(notebook, as_version=4)
    assert all(saved.cells[i].execution_count for i in plan.code), "the run was saved"
    outputs = [o for i in plan.code for o in saved.cells[i].outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    for index in plan.meters:
        meters = [
            o.data
            for o in saved.cells[index].outputs
            if "evo-magic-meter" in o.get("data", {}).get("text/html", "")
        ]
        assert [set(data) for data in meters] == [{"text/html", "text/plain"}], index


def check_reopened(page: Page, plan: Plan, notebook: Path) -> None:
    """A reopened notebook shows every meter's HTML and no widget (a widget view would need
    the kernel that made it)."""
    for index in plan.meters:
        expect(meter(page, index)).to_be_visible()
    widget_views = page.locator(f".jp-OutputArea-output[data-mime-type='{WIDGET_VIEW}']")
    expect(widget_views).to_have_count(0)
    expect(page.locator(".jp-Notebook")).not_to_contain_text("Error displaying widget")
    check_meters(page, plan, notebook)


# -- what the user sees --------------------------------------------------------------------


def cell(page: Page, index: int) -> Locator:
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def meter(page: Page, index: int) -> Locator:
    return cell(page, index).locator(".evo-magic-meter")


def check_live_outputs(page: Page, plan: Plan, notebook: Path) -> None:
    """After Run All: each %%agent cell shows its tool lines (expandable) and its footer."""
    for index in plan.agent:
        log = cell(page, index).locator(".evo-magic-cell")
        expect(log).to_be_visible()
        tools = log.locator("details[data-tool]")
        assert tools.count() >= 1, f"cell {index} shows no tool line"
        assert {tools.nth(i).get_attribute("data-tool") for i in range(tools.count())} <= TOOLS
        expect(tools.first.locator("summary")).to_have_text(re.compile(r"^✓ "))
        expect(log).to_contain_text(re.compile(r"model calls, stop: \w+"))
        # Dollar amounts stay text: no front end typesets "$0.01 this cell, $0.02" as LaTeX.
        expect(log).to_contain_text(re.compile(r"cost \$[\d.]+ this cell, \$[\d.]+ so far"))
    # Every cell's live widget became its static snapshot when the cell ended.
    widget_views = page.locator(f".jp-OutputArea-output[data-mime-type='{WIDGET_VIEW}']")
    expect(widget_views).to_have_count(0)
    first = cell(page, plan.agent[0]).locator("details[data-tool]").first
    output = first.locator("pre").last
    expect(output).to_be_hidden()
    first.locator("summary").click()
    expect(output).to_be_visible()
    check_meters(page, plan, notebook)


def check_meters(page: Page, plan: Plan, notebook: Path) -> None:
    """Each meter shows its HTML with the state its cell ended in and that cell's story: the
    context before it (where the cell above ended) and after it (the numbers of the %%agent
    cell's footer, what %agent context printed), its own compactions only, and a chart with
    its axes, the limit and a mark for every compaction up to the cell."""
    cells = [i for i in plan.meters if i not in plan.context]
    previous = None
    marks = {"full": 0, "micro": 0}
    for index in plan.meters:
        shown = meter(page, index)
        expect(shown).to_have_count(1)
        check_header(shown, "session" if index in plan.context else "cell")
        if index in plan.context:
            expect(shown).to_have_attribute("data-scope", "session")
            check_chart(shown, total=marks, calls=shown.locator(".evo-point").count())
            continue
        expect(shown).to_have_attribute("data-scope", "cell")
        before, now = _story(shown, "before"), _story(shown, "now")
        if previous is not None:
            assert before == previous, f"cell {index} starts where the cell above ended"
        previous = now
        own = shown.locator("details.evo-compaction")
        for i in range(own.count()):
            row = own.nth(i)
            kind = row.get_attribute("data-kind")
            marks[kind] += 1 if kind == "full" else int(row.get_attribute("data-count"))
        calls = int(re.search(r"(\d+) model calls?", shown.inner_text()).group(1))
        check_chart(shown, total=marks, calls=calls)
    check_no_math(page)
    full = [_labels(meter(page, index)) for index in cells]
    assert full == [[], ["C1"], ["C2"]], "each cell lists its own full compactions"
    for index in plan.agent:
        footer = _numbers(CONTEXT_NUMBERS, cell(page, index).locator(".evo-magic-cell"))
        assert _story(meter(page, index), "now")[:2] == footer, f"cell {index}"
    for index in plan.compact:
        source = nbformat.read(notebook, as_version=4).cells[index].source
        focus = parse_compact_line(source.strip().removeprefix("%compact")).focus
        assert focus, "the quick start's %compact has a focus"
        expect(meter(page, index)).to_contain_text("by hand, %compact")
        expect(meter(page, index)).to_contain_text(focus)
    for index in plan.context:
        printed = _numbers(
            CONTEXT_NUMBERS, cell(page, index).locator(".jp-OutputArea-output").first
        )
        assert _story(meter(page, index), "now")[:2] == printed, f"cell {index}"
        assert _labels(meter(page, index)) == ["C1", "C2"]


def check_no_math(page: Page) -> None:
    """No part of a cell's log or meter was typeset as LaTeX (their "$" are amounts)."""
    typeset = page.locator(".evo-magic-cell mjx-container, .evo-magic-meter mjx-container")
    expect(typeset).to_have_count(0)


def check_header(shown: Locator, scope: str) -> None:
    """A meter's header is quiet: what changed in tokens and messages (characters on hover),
    no session id, no cost when it cost nothing (the offline model)."""
    title = shown.locator("div").first
    expect(title).to_have_text(
        re.compile(r"^context meter · (this cell( \(asks? [\d-]+\))?|the whole session)$")
    )
    expect(title).to_have_attribute("title", re.compile(r"^session \d{8}-"))
    now = shown.locator(".evo-now")
    expect(now).to_have_text(re.compile(r"^~?[\d,]+ tokens · \d+ messages?$"))
    expect(now).to_have_attribute("title", re.compile(r"^[\d,]+ characters of messages"))
    if scope == "cell":
        expect(shown.locator(".evo-change")).to_have_text(
            re.compile(r"^\(([+-][\d,]+|0) tokens, ([+-][\d,]+|0) messages?\)$|^\(unchanged\)$")
        )
    expect(shown.locator(".evo-counts")).not_to_contain_text("$")
    expect(shown.locator(".evo-fill")).to_contain_text(
        re.compile(r"\d+% of the limit: ~?[\d,]+ of [\d,]+ tokens")
    )
    # No number is broken across lines: each size, change and count is one box on one line.
    spans = shown.locator(".evo-story span[style*=nowrap], .evo-counts span")
    assert spans.count() >= 3
    broken = spans.evaluate_all(
        "els => els.filter(e => e.getClientRects().length > 1).map(e => e.textContent)"
    )
    assert broken == [], f"wrapped inside: {broken}"


def check_untrusted(page: Page, plan: Plan) -> None:
    """Sanitised, every meter still shows its numbers, its chart (columns, marks, axes) and
    its compactions, which still open on a click; no tooltip text spills into the page."""
    meters = page.locator(".evo-magic-meter")
    expect(meters).to_have_count(len(plan.meters))
    expect(page.locator(".evo-magic-meter[data-scope]")).to_have_count(0)  # it was sanitised
    for index in plan.meters:
        shown = meter(page, index)
        expect(shown.locator(".evo-chart .evo-point").first).to_be_visible()
        expect(shown.locator(".evo-chart .evo-axis-x")).to_contain_text("model call")
        expect(shown.locator(".evo-chart .evo-limit")).to_contain_text("limit 12,000 chars")
        assert "before it:" not in shown.inner_text(), "tooltip text spilled into the page"
        title = shown.locator(".evo-chart .evo-point").first.get_attribute("title") or ""
        assert title.startswith("call 1 (ask 1)")
    expect(meter(page, plan.agent[1]).locator(".evo-chart .evo-mark")).not_to_have_count(0)
    automatic = meter(page, plan.agent[1]).locator("details.evo-compaction").last
    automatic.locator("summary").click()
    expect(automatic.locator(".evo-summary")).to_be_visible()


def check_chart(shown: Locator, total: dict[str, int], calls: int) -> None:
    """The chart: labelled axes, the limit labelled, one mark per compaction so far (every one
    inside the plot), and a tooltip on each call's column."""
    chart = shown.locator(".evo-chart")
    expect(chart).to_have_count(1)
    expect(chart.locator(".evo-axis-x")).to_contain_text("model call")
    expect(chart.locator(".evo-axis-y")).to_contain_text("context sent (tokens")
    expect(chart.locator(".evo-limit")).to_contain_text("limit 12,000 chars")
    for kind, count in total.items():
        expect(chart.locator(f".evo-mark[data-kind='{kind}']")).to_have_count(count)
    plot = chart.locator(".evo-plot").bounding_box()
    assert plot is not None
    for box in (m.bounding_box() for m in chart.locator(".evo-mark").all()):
        assert box is not None
        middle = box["x"] + box["width"] / 2
        assert plot["x"] <= middle <= plot["x"] + plot["width"], "a mark is outside the plot"
    titles = [c.get_attribute("title") or "" for c in chart.locator(".evo-point").all()]
    assert titles and all(re.match(r"call \d+ \(ask \d+\)", title) for title in titles)
    full = re.compile(r"call \d+ \(ask \d+\)\nsent [\d,]+ messages?, [\d,]+ chars, ~?[\d,]+ tokens")
    own = [title for title in titles if full.match(title)]
    assert len(own) == calls, "the scope's own calls have the whole story in their tooltip"
    assert all("before it: " in title for title in own)


def check_opening_compactions(page: Page, plan: Plan, notebook: Path, screenshots: Path) -> None:
    """Clicking a compaction opens its summary, focus and what it replaced (plain <details>)."""
    automatic = meter(page, plan.agent[1]).locator("details.evo-compaction[data-kind='full']")
    expect(automatic).to_have_count(1)
    summary = automatic.locator(".evo-summary")
    expect(summary).to_be_hidden()
    automatic.locator("summary").click()
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("Summary")
    expect(automatic.locator(".evo-replaced")).to_contain_text("tool results")
    expect(automatic).to_contain_text("focus: none")
    meter(page, plan.agent[1]).screenshot(path=screenshots / "6-compaction-opened.png")

    source = nbformat.read(notebook, as_version=4).cells[plan.compact[0]].source
    focus = parse_compact_line(source.strip().removeprefix("%compact")).focus
    manual = meter(page, plan.compact[0]).locator("details.evo-compaction[data-kind='full']")
    manual.locator("summary").click()
    expect(manual.locator(".evo-focus")).to_have_text(focus or "")
    expect(manual.locator(".evo-summary")).to_be_visible()
    meter(page, plan.compact[0]).screenshot(path=screenshots / "7-manual-compaction-opened.png")


def _story(where: Locator, which: str) -> tuple[int, int, int]:
    """(messages, chars, tokens) of a meter's "before" or "now"."""
    span = where.locator(f".evo-{which}")
    expect(span).to_have_count(1)
    return tuple(
        int(span.get_attribute(f"data-{name}") or -1) for name in ("messages", "chars", "tokens")
    )


def _labels(where: Locator) -> list[str]:
    rows = where.locator("details.evo-compaction[data-kind='full']")
    return [rows.nth(i).get_attribute("data-label") or "" for i in range(rows.count())]


def _numbers(pattern: re.Pattern[str], where: Locator) -> tuple[int, ...]:
    found = pattern.search(where.inner_text())
    assert found, f"{pattern.pattern!r} not in {where.inner_text()[:300]!r}"
    return tuple(int(group.replace(",", "")) for group in found.groups())
