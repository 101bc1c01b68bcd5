"""Shared fixtures: a loopback fake of the Messages API, a Claude model pointed at it, and a
workspace holding the sample project."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_api import FakeAnthropic, Reply  # noqa: E402

from evo_magic.demo import make_demo_workspace  # noqa: E402
from evo_magic.models import AnthropicModel, ModelRequest, OfflineModel  # noqa: E402


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see a real key or endpoint: only the loopback fake is reachable."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A started fake; at teardown it asserts that it rejected nothing."""
    with FakeAnthropic() as server:
        yield server
        server.assert_no_rejections()


@pytest.fixture
def claude(fake: FakeAnthropic) -> AnthropicModel:
    """A Claude model that talks to the fake through the real SDK."""
    return AnthropicModel("claude-sonnet-5-5", client=fake.client())


def sandbox_here() -> str:
    """The sandbox setting for tests of bash's own behaviour (exit codes, timeouts, output): the
    default where bubblewrap works; "off" elsewhere, so that the one-time warning of a machine
    without it (tested in test_sandbox.py) does not stand in front of the output they read."""
    from evo_magic.tools import DEFAULT_SANDBOX, sandbox_status

    return DEFAULT_SANDBOX if sandbox_status().available else "off"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_demo_workspace(tmp_path / "work")


def offline_responder() -> object:
    """A fake responder that answers like the offline model, so whole scripted sessions can run
    through the real SDK and the fake's validation."""
    model = OfflineModel()

    def respond(body: dict) -> Reply:
        request = ModelRequest(
            messages=body["messages"],
            max_tokens=body["max_tokens"],
            system=body.get("system", "") if isinstance(body.get("system"), str) else "",
            tools=body.get("tools", []),
            tool_choice=body.get("tool_choice"),
        )
        reply = model.respond(request)
        return Reply(content=reply.content, stop_reason=reply.stop_reason or "end_turn")

    return respond


@pytest.fixture
def ip(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """A real IPython shell with the extension loaded, working in the sample workspace (one
    shell per process, as IPython keeps it)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()
    monkeypatch.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    shell.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
    yield shell
    shell.run_line_magic("unload_ext", "evo_magic")
    shell.config.pop("AgentMagics", None)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The fake, answering like the offline model, reached through ANTHROPIC_BASE_URL."""
    with FakeAnthropic(offline_responder()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        yield server
        server.assert_no_rejections()
