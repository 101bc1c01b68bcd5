"""A failed and a successful compaction at one call, in a real JupyterLab: the meter's labels
("failed", "C1") and the limit's never overprint, measured on the text as Chromium lays it out
(the ink of each label, not the box it was given), in the %compact cell's meter and in
`%agent context`'s; screenshots of both."""

from __future__ import annotations

from pathlib import Path

import pytest
from lab_harness import RunningLab
from playwright.sync_api import Locator, Page, expect
from test_jupyterlab import cell, meter, run_cells

pytestmark = pytest.mark.slow  # a JupyterLab server and headless Chromium

CELLS = [
    "import tempfile\n"
    "from pathlib import Path\n"
    "from evo_magic.demo import make_demo_workspace\n"
    'workspace = make_demo_workspace(Path(tempfile.mkdtemp(prefix="evo-magic-labels-")))\n'
    "%load_ext evo_magic\n"
    "%config AgentMagics.workspace = str(workspace)",
    "class Broken:\n"
    '    """A strategy that fails when asked to compact."""\n'
    '    name = "broken"\n'
    '    when = "on_request"\n'
    "    def compact(self, messages, ctx):\n"
    '        raise RuntimeError("out of ideas")\n'
    '%config AgentMagics.strategies = ["Broken", "summarise(when=\'on_request\')"]',
    "%%agent\nSurvey this project: what does it do, and where are the TODOs?",
    "%compact",
    "%%agent\nNow look again and double-check the notes against the code.",
    "%agent context",
]
"""The %compact cell's first strategy fails and the next succeeds: two compactions before one
call."""

INK = """element => {
    const range = document.createRange();
    range.selectNodeContents(element);
    const box = range.getBoundingClientRect();
    return [element.textContent.trim(), box.left, box.top, box.right, box.bottom];
}"""
"""The rectangle of a label's text as laid out (its ink), with the text."""


def label_boxes(shown: Locator) -> list[tuple[str, float, float, float, float]]:
    """The compaction labels and the limit's label of one meter's chart, each with its ink."""
    chart = shown.locator(".evo-chart")
    labels = chart.locator(".evo-mark[data-kind='full'] .evo-mark-label").all()
    labels += chart.locator(".evo-limit > div").all()
    return [tuple(label.evaluate(INK)) for label in labels]


def overlapping(boxes: list[tuple[str, float, float, float, float]]) -> list[tuple[str, str]]:
    return [
        (a[0], b[0])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]


@pytest.mark.timeout(300)
def test_labels_of_a_failed_and_a_successful_compaction_at_one_call_do_not_overlap(
    running_lab: RunningLab, page: Page, screenshots: Path
):
    with run_cells(running_lab, page, "labels.ipynb", CELLS) as plan:
        expect(cell(page, plan.compact[0])).to_contain_text("out of ideas")
        for index, shot in ((plan.compact[0], "12"), (plan.context[0], "13")):
            shown = meter(page, index)
            shown.scroll_into_view_if_needed()
            boxes = label_boxes(shown)
            names = sorted(box[0] for box in boxes)
            assert names[:2] == ["C1", "failed"] and names[2].startswith("limit "), names
            assert all(box[3] > box[1] and box[4] > box[2] for box in boxes)  # drawn, visible
            failed, c1 = (next(b for b in boxes if b[0] == name) for name in ("failed", "C1"))
            assert abs(failed[1] - c1[1]) < 2  # at one call: only their stacking parts them
            assert overlapping(boxes) == []
            shown.screenshot(path=screenshots / f"{shot}-failed-and-C1-at-one-call.png")
    print(f"screenshots: {screenshots}")
