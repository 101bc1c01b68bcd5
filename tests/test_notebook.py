"""Real notebooks on a real ipykernel: executed with nbclient, and interrupted mid-cell."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from fake_api import FakeAnthropic, reply, text, tool_use
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

TESTS = Path(__file__).parent
NOTEBOOKS = sorted((TESTS.parent / "notebooks").glob("*.ipynb"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def kernel_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


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


def test_a_notebook_runs_with_the_offline_model(workspace: Path):
    nb = run_notebook(
        [
            "%load_ext evo_magic\n%config AgentMagics.context_limit = 9000",
            "%%agent\nSurvey the project and keep notes.",
            '%compact focus="the TODOs and the notes"',
            "%agent context",
            "assert _agent.stop_reason == 'end_turn', _agent\nprint(_agent.text[:40])",
        ],
        workspace,
    )
    outputs = outputs_of(nb)
    assert not [o for o in outputs if o["output_type"] == "error"]
    htmls = [o.get("data", {}).get("text/html", "") for o in outputs]
    assert any("evo-magic-cell" in h and "<details" in h for h in htmls)
    assert any("evo-magic-meter" in h and "layer 2 (auto)" in h for h in htmls)
    assert any("layer 3 (%compact)" in h for h in htmls)
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    meters = [s["state"] for s in state.values() if "context_limit" in s["state"]]
    assert meters and meters[-1]["context_limit"] == 9000
    assert any(c["layer"] == "layer 3 (%compact)" for c in meters[-1]["compactions"])


def test_finished_cells_keep_their_meter_as_static_html(workspace: Path):
    """A widget view shows only while its kernel runs: a finished cell's meter must be plain
    HTML, so that the saved notebook shows it when reopened without a kernel."""
    nb = run_notebook(
        [
            "%load_ext evo_magic\n%config AgentMagics.context_limit = 9000",
            "%%agent\nSurvey the project and keep notes.",
            '%compact focus="the TODOs and the notes"',
            "%agent context",
            "%agent context --live",
        ],
        workspace,
    )
    meters = [
        [
            o["data"]
            for o in cell.outputs
            if "evo-magic-meter" in o.get("data", {}).get("text/html", "")
        ]
        for cell in nb.cells
    ]
    assert [len(m) for m in meters] == [0, 1, 1, 1, 1]
    agent, compact, context, live = (m[0] for m in meters[1:])
    for static in (agent, compact, context):
        assert set(static) == {"text/html", "text/plain"}
    assert "layer 2 (auto)" in agent["text/html"] and "%compact" not in agent["text/html"]
    assert "the TODOs and the notes" in compact["text/html"]
    assert context["text/html"] == compact["text/html"]
    assert WIDGET_VIEW in live and live["text/html"] == compact["text/html"]


def test_meter_is_a_live_widget_while_the_cell_runs(workspace: Path):
    """On the wire: the cell first displays the widget, then replaces that same display with
    the static snapshot when it ends."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(workspace), env=kernel_env())
    kc = km.client()
    kc.start_channels()
    messages: list[dict] = []
    try:
        kc.wait_for_ready(timeout=60)
        setup = "%load_ext evo_magic\n%config AgentMagics.context_limit = 9000"
        assert kc.execute_interactive(setup, timeout=60)["content"]["status"] == "ok"
        cell = "%%agent\nSurvey the project and keep notes."
        reply = kc.execute_interactive(cell, timeout=60, output_hook=messages.append)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    displays = [
        (m["msg_type"], m["content"]["transient"].get("display_id"), m["content"]["data"])
        for m in messages
        if m["msg_type"] in ("display_data", "update_display_data")
    ]
    shown = [(kind, key) for kind, key, data in displays if WIDGET_VIEW in data]
    assert len(shown) == 1 and shown[0][0] == "display_data"
    meter_id = shown[0][1]
    updates = [data for kind, key, data in displays if key == meter_id and kind != "display_data"]
    assert updates, "the meter's display is replaced when the cell ends"
    assert set(updates[-1]) == {"text/html", "text/plain"}
    assert "layer 2 (auto)" in updates[-1]["text/html"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_example_notebooks_run_without_errors(path: Path, tmp_path: Path):
    nb = nbformat.read(path, as_version=4)
    assert not [c for c in nb.cells if c.get("outputs")], "commit notebooks without outputs"
    executed = execute(nb, tmp_path)
    errors = [o for o in outputs_of(executed) if o["output_type"] == "error"]
    assert not errors, errors[0].get("evalue") if errors else ""
    assert any("offline" in json_text(o) for o in outputs_of(executed))


def json_text(output: dict) -> str:
    return output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))


def test_kernel_interrupt_mid_agent_keeps_a_valid_history(workspace: Path):
    with FakeAnthropic() as api:
        api.queue(reply(text("Running it."), tool_use("bash", {"command": "sleep 60"})))
        env = kernel_env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-test-kernel-00")
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=str(workspace), env=env)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
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
            check = (
                "from fake_api import validate_messages\n"
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
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def _wait_for_request(api: FakeAnthropic, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(api.accepted) < count:
        if time.monotonic() > deadline:
            pytest.fail("the kernel never called the API")
        time.sleep(0.05)


def _reply_to(kc, msg_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_shell_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg
    raise AssertionError("no reply to the interrupted cell")
