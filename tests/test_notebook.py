"""Real notebooks on a real ipykernel: executed with nbclient, and interrupted mid-cell."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from support.fake_api import FakeAnthropic, reply, text, tool_use
from support.kernels import TESTS, kernel, kernel_env

NOTEBOOKS = sorted((TESTS.parent / "notebooks").glob("*.ipynb"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
pytestmark = pytest.mark.slow  # every test starts a kernel (nbclient, or one of its own)


def run_notebook(cells: list[str], workspace: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    return execute(nb, workspace)


def execute(nb: nbformat.NotebookNode, workspace: Path) -> nbformat.NotebookNode:
    """Run `nb` on a fresh python3 ipykernel in `workspace`, with no Anthropic credentials."""
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(workspace)}},
        km=KernelManager(kernel_name="python3"),
    )
    client.km.kernel_spec  # noqa: B018 - resolve the spec before we set the environment
    with _env(kernel_env()):
        client.execute()
    return nb


class _env:
    """Temporarily replace os.environ (the kernel inherits it)."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def __enter__(self) -> None:
        self.saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)

    def __exit__(self, *exc: object) -> None:
        os.environ.clear()
        os.environ.update(self.saved)


def outputs_of(nb: nbformat.NotebookNode) -> list[dict]:
    return [output for cell in nb.cells for output in cell.get("outputs", [])]


def meters_of(nb: nbformat.NotebookNode) -> list[list[dict]]:
    """Per cell, the data of each output that is a context meter."""
    return [
        [
            o["data"]
            for o in cell.get("outputs", [])
            if "evo-magic-meter" in o.get("data", {}).get("text/html", "")
        ]
        for cell in nb.cells
    ]


def story(page: str) -> dict[str, tuple[int, int, int]]:
    """The before/now numbers a meter shows: {"before"|"now": (messages, chars, tokens)}."""
    found = re.findall(
        r"class='evo-(before|now)' data-messages='(\d+)' data-chars='(\d+)' data-tokens='(\d+)'",
        page,
    )
    return {name: (int(m), int(c), int(t)) for name, m, c, t in found}


def full_compactions(page: str) -> list[str]:
    """The labels of the full compactions a meter lists, in order."""
    return re.findall(r"<details class='evo-compaction' data-kind='full' data-label='(\w+)'", page)


def test_a_notebook_runs_with_the_offline_model(workspace: Path):
    nb = run_notebook(
        [
            "%load_ext evo_magic\n%config AgentMagics.context_limit = 9000",
            "%%agent\nSurvey the project and keep notes.",
            '%compact focus="the TODOs and the notes"',
            "%agent context --live",
            "assert _agent.stop_reason == 'end_turn', _agent\nprint(_agent.text[:40])",
        ],
        workspace,
    )
    outputs = outputs_of(nb)
    assert not [o for o in outputs if o["output_type"] == "error"]
    htmls = [o.get("data", {}).get("text/html", "") for o in outputs]
    assert any("evo-magic-cell" in h and "<details" in h for h in htmls)
    assert any(
        "evo-magic-meter" in h and "summarise</b> (over-limit strategy; automatic)" in h
        for h in htmls
    )
    assert any("by hand, %compact" in h for h in htmls)
    # The live meter's widget state is saved with the notebook: the session's numbers.
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    meters = [s["state"] for s in state.values() if s["state"].get("scope") == "session"]
    assert meters and meters[-1]["context_limit"] == 9000
    assert [c["trigger"] for c in meters[-1]["compactions"] if not c["micro"]][-1] == "user"


def test_each_cell_keeps_its_own_meter_as_static_html(workspace: Path):
    """A widget view shows only while its kernel runs: a finished cell's meter is plain HTML
    (so the saved notebook shows it reopened without a kernel), and it tells that cell's
    story: its context before and after, its compactions, never a later cell's."""
    nb = run_notebook(
        [
            "%load_ext evo_magic\n%config AgentMagics.context_limit = 12000",
            "%%agent\nSurvey the project and keep notes.",
            "%%agent\nNow look again and double-check the notes against the code.",
            '%compact focus="the TODOs and the notes"',
            "%agent context",
            "%agent context --live",
        ],
        workspace,
    )
    meters = meters_of(nb)
    assert [len(m) for m in meters] == [0, 1, 1, 1, 1, 1]
    first, second, compact, context, live = (m[0] for m in meters[1:])
    for static in (first, second, compact, context):
        assert set(static) == {"text/html", "text/plain"}
    pages = [m["text/html"] for m in (first, second, compact)]
    stories = [story(page) for page in pages]
    for earlier, later in zip(stories, stories[1:], strict=False):
        assert later["before"] == earlier["now"]  # each cell starts where the last one ended
    assert stories[0]["before"][0] == 0
    assert [full_compactions(page) for page in pages] == [[], ["C1"], ["C2"]]
    assert "the TODOs and the notes" in pages[2] and "the TODOs and the notes" not in pages[1]
    assert "data-scope='cell'" in pages[0] and "data-scope='session'" in context["text/html"]
    assert full_compactions(context["text/html"]) == ["C1", "C2"]
    assert story(context["text/html"])["now"] == stories[2]["now"]
    assert WIDGET_VIEW in live and live["text/html"] == context["text/html"]


def test_meter_is_a_live_widget_while_the_cell_runs(workspace: Path):
    """On the wire: the cell first displays the widget, updates its view as the session
    goes, then replaces that display with the static snapshot (the very HTML the widget
    showed last) and closes the widget."""
    messages: list[dict] = []
    with kernel(workspace) as (_, kc):
        setup = "%load_ext evo_magic\n%config AgentMagics.context_limit = 9000"
        assert kc.execute_interactive(setup, timeout=60)["content"]["status"] == "ok"
        cell = "%%agent\nSurvey the project and keep notes."
        reply = kc.execute_interactive(cell, timeout=60, output_hook=messages.append)
        assert reply["content"]["status"] == "ok"
    displays = [
        (m["msg_type"], m["content"]["transient"].get("display_id"), m["content"]["data"])
        for m in messages
        if m["msg_type"] in ("display_data", "update_display_data")
    ]
    shown = [(kind, key, data) for kind, key, data in displays if WIDGET_VIEW in data]
    assert len(shown) == 1 and shown[0][0] == "display_data"
    meter_id = shown[0][1]
    updates = [data for kind, key, data in displays if key == meter_id and kind != "display_data"]
    assert updates, "the meter's display is replaced when the cell ends"
    assert set(updates[-1]) == {"text/html", "text/plain"}
    final = updates[-1]["text/html"]
    assert "data-scope='cell'" in final and full_compactions(final) == ["C1"]
    views = [
        m["content"]["data"]["state"]["value"]
        for m in messages
        if m["msg_type"] == "comm_msg" and "value" in m["content"]["data"].get("state", {})
    ]
    assert len(views) >= 2, "the widget's view followed the session"
    assert views[-1] == final  # the live view and the kept snapshot agree
    closed = [m for m in messages if m["msg_type"] == "comm_close"]
    assert closed, "the finished cell's widget is closed"


_EXECUTED: dict[Path, nbformat.NotebookNode] = {}


def executed_example(path: Path, tmp_path: Path) -> nbformat.NotebookNode:
    """An example notebook, executed once per test session."""
    if path not in _EXECUTED:
        nb = nbformat.read(path, as_version=4)
        assert not [c for c in nb.cells if c.get("outputs")], "commit notebooks without outputs"
        _EXECUTED[path] = execute(nb, tmp_path)
    return _EXECUTED[path]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_example_notebooks_run_without_errors(path: Path, tmp_path: Path):
    executed = executed_example(path, tmp_path)
    errors = [o for o in outputs_of(executed) if o["output_type"] == "error"]
    assert not errors, errors[0].get("evalue") if errors else ""
    assert any("offline" in json_text(o) for o in outputs_of(executed))


def test_quickstart_frames_read_well(tmp_path: Path):
    """`%agent history` shows one kind of missing value; `t.compactions` shows the sizes before
    and after each compaction, not behind pandas' column ellipsis."""
    nb = executed_example(TESTS.parent / "notebooks" / "quickstart.ipynb", tmp_path)
    pages = {
        cell.source.strip(): "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
        for cell in nb.cells
        if cell.cell_type == "code"
    }
    history = pages["%agent history"]
    assert "&lt;NA&gt;" in history and "NaN" not in history
    compactions = next(page for source, page in pages.items() if source.endswith("t.compactions"))
    headers = re.findall(r"<th>(\w+)</th>", compactions)
    for column in ("strategy", "trigger", "focus", "before_chars", "after_chars"):
        assert column in headers, headers
    assert {"before_tokens", "after_tokens"} <= set(headers)


def json_text(output: dict) -> str:
    return output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))


def test_kernel_interrupt_mid_agent_keeps_a_valid_history(workspace: Path):
    with FakeAnthropic() as api:
        api.queue(reply(text("Running it."), tool_use("bash", {"command": "sleep 60"})))
        env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-test-kernel-00"}
        with kernel(workspace, **env) as (km, kc):
            setup = "%load_ext evo_magic\n%config AgentMagics.display_mode = 'plain'"
            assert kc.execute_interactive(setup, timeout=60)["content"]["status"] == "ok"
            msg_id = kc.execute("%%agent\nRun the slow command.")
            _wait_for_request(api, 1)
            time.sleep(1.0)  # the tool is running now
            km.interrupt_kernel()
            interrupted = _reply_to(kc, msg_id)
            assert interrupted["content"]["status"] == "error"
            assert "KeyboardInterrupt" in interrupted["content"]["ename"] or (
                "Interrupted" in interrupted["content"]["ename"]
            )
            assert interrupted["content"]["traceback"] == [  # one line, said once
                "Interrupted: the history is kept (3 messages); the next cell continues the "
                "conversation."
            ]
            streamed = "".join(m["content"].get("text", "") for m in _iopub_of(kc, msg_id))
            assert "Running it." in streamed and "nterrupted" not in streamed
            check = (
                "from support.fake_api import validate_messages\n"
                "m = next(c for c in get_ipython().configurables "
                "if type(c).__name__ == 'AgentMagics')\n"
                "h = m.sessions['default'].messages\n"
                "assert validate_messages(h) is None, validate_messages(h)\n"
                "assert h[-1]['content'][0]['is_error'], h[-1]\n"
            )
            assert kc.execute_interactive(check, timeout=60)["content"]["status"] == "ok"
            api.queue(reply(text("Continuing after the interrupt.")))
            again = kc.execute_interactive("%%agent\nGo on.", timeout=60)
            assert again["content"]["status"] == "ok"
            api.assert_no_rejections()


def _wait_for_request(api: FakeAnthropic, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(api.accepted) < count:
        if time.monotonic() > deadline:
            pytest.fail("the kernel never called the API")
        time.sleep(0.05)


def _iopub_of(kc, msg_id: str, timeout: float = 60) -> list[dict]:
    """The iopub messages of one request, up to its kernel going idle."""
    seen = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
        seen.append(msg)


def _reply_to(kc, msg_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_shell_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg
    raise AssertionError("no reply to the interrupted cell")
