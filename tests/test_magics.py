"""The magics in a real InteractiveShell, talking to the loopback fake through the real SDK."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import offline_responder
from example_strategy import KeepLastTurns
from fake_api import FakeAnthropic, reply, text, tool_use, validate_messages
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

from evo_magic.cost import call_cost
from evo_magic.notebook.magics import AgentMagics, CompactArgs, parse_compact_line

FOCUS = "keep the {braces} and $dollars"


@pytest.fixture
def ip(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """A real IPython shell with the extension loaded, working in the sample workspace."""
    shell = start_ipython() or InteractiveShell.instance()
    monkeypatch.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    shell.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
    yield shell
    shell.run_line_magic("unload_ext", "evo_magic")
    shell.config.pop("AgentMagics", None)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch):
    """The fake, answering like the offline model, reached through ANTHROPIC_BASE_URL."""
    with FakeAnthropic(offline_responder()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        yield server
        server.assert_no_rejections()


def magics(shell) -> AgentMagics:
    return next(m for m in shell.configurables if isinstance(m, AgentMagics))


def summary_requests(server: FakeAnthropic) -> list[dict]:
    return [body for body in server.accepted if not body.get("tools")]


def test_load_and_unload(ip):
    assert "agent" in ip.magics_manager.magics["cell"]
    assert {"agent", "compact"} <= set(ip.magics_manager.magics["line"])
    ip.run_line_magic("unload_ext", "evo_magic")
    assert "agent" not in ip.magics_manager.magics["cell"]
    assert "compact" not in ip.magics_manager.magics["line"]
    assert not any(isinstance(m, AgentMagics) for m in ip.configurables)
    ip.run_line_magic("load_ext", "evo_magic")
    assert "agent" in ip.magics_manager.magics["cell"]


def test_loading_imports_neither_anthropic_nor_pandas():
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'evo_magic')\n"
        "assert 'agent' in shell.magics_manager.magics['cell']\n"
        "print(json.dumps([m for m in ('anthropic', 'pandas', 'ipywidgets', 'dask', 'distributed')"
        " if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_agent_cell_end_to_end(ip, api):
    ip.run_line_magic("config", "AgentMagics.context_limit = 9000")
    with capture_output() as captured:
        ip.run_cell_magic("agent", "", "Survey the project and keep notes.")
    out = captured.stdout
    assert "Step 1/6" in out and "Step 6/6" in out  # streamed text
    assert "bash: ls -la -> ok" in out  # one line per tool call
    assert "read_file: inventory.py -> ok" in out
    assert "compaction (auto)" in out
    assert "model calls, stop: end_turn" in out  # the footer
    result = ip.user_ns["_agent"]
    assert result.stop_reason == "end_turn" and "Step 6/6" in result.text
    assert any(e.kind == "compaction" for e in result.events)
    session = magics(ip).sessions["default"]
    assert validate_messages(session.messages) is None
    assert all(body["model"] == "claude-sonnet-5-5" for body in api.accepted)


def test_agent_cell_rich_output(ip, api):
    ip.run_line_magic("config", "AgentMagics.display_mode = 'rich'")
    with capture_output() as captured:
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    htmls = [o.data.get("text/html", "") for o in captured.outputs]
    log = next(h for h in reversed(htmls) if "evo-magic-cell" in h)
    assert "<details" in log and "ls -la" in log
    assert "3 model calls, stop: max_turns" in log
    assert any("evo-magic-meter" in h for h in htmls)
    plain = [o.data.get("text/plain", "") for o in captured.outputs]
    assert any("context:" in p for p in plain)


def test_cell_body_is_sent_as_written(ip, api):
    ip.user_ns["x"] = "EXPANDED"
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "print({x}) costs $x")
    assert api.accepted[0]["messages"][0]["content"][0]["text"] == "print({x}) costs $x"
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1 --expand -s other", "value {x}")
    assert api.accepted[-1]["messages"][0]["content"][0]["text"] == "value EXPANDED"


def test_compact_focus_reaches_the_summariser_literally(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 2", "Look around.")
    with capture_output() as captured:
        ip.run_line_magic("compact", f'focus="{FOCUS}"')
    assert "compaction (user)" in captured.stdout and "->" in captured.stdout
    (summary,) = summary_requests(api)
    assert FOCUS in summary["messages"][0]["content"][0]["text"]
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Continue.")
    history = api.accepted[-1]["messages"][0]["content"][0]["text"]
    assert f"Focus to preserve next: {FOCUS}" in history


def test_compact_alone_and_bare_focus(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Look around.")
        ip.run_line_magic("compact", "")
        ip.run_cell_magic("agent", "--max-turns 1", "Again.")
        ip.run_line_magic("compact", "the notes file")
    first, second = summary_requests(api)
    assert "preserve, above all" not in first["messages"][0]["content"][0]["text"]
    assert "above all: the notes file" in second["messages"][0]["content"][0]["text"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", CompactArgs()),
        ('focus="a b {c} $d"', CompactArgs(focus="a b {c} $d")),
        ("focus=plain words here", CompactArgs(focus="plain words here")),
        ("just words", CompactArgs(focus="just words")),
        ("-s lab focus='x y'", CompactArgs("lab", "x y")),
        ("--session=lab", CompactArgs("lab")),
        ("focus=the user's notes", CompactArgs(focus="the user's notes")),
        (r"focus=keep C:\data\new", CompactArgs(focus=r"keep C:\data\new")),
        ('"unclosed', CompactArgs(focus='"unclosed')),
        (
            "--strategy summarise-older(keep=3) -s lab x",
            CompactArgs("lab", "x", "summarise-older(keep=3)"),
        ),
        ("--preview focus=x", CompactArgs(focus="x", preview=True)),
        ("-- -s is part of the focus", CompactArgs(focus="-s is part of the focus")),
    ],
)
def test_parse_compact_line(line, expected):
    assert parse_compact_line(line) == expected


def test_focus_reaches_the_summariser_exactly_as_typed(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Look around.")
        ip.run_line_magic("compact", "focus=the user's notes")
        ip.run_cell_magic("agent", "--max-turns 1", "Again.")
        ip.run_line_magic("compact", r"focus=keep C:\data\new and {x}")
    first, second = summary_requests(api)
    assert "above all: the user's notes" in first["messages"][0]["content"][0]["text"]
    assert r"above all: keep C:\data\new and {x}" in second["messages"][0]["content"][0]["text"]


def test_a_bad_out_name_is_refused_before_the_task_runs(ip, api):
    with pytest.raises(UsageError, match="variable name"), capture_output():
        ip.run_cell_magic("agent", "-o 1bad", "Do something expensive.")
    assert api.accepted == []


@pytest.mark.parametrize(
    ("kind", "line", "cell", "message"),
    [
        ("cell", "--max-turns many", "task", "invalid int value"),
        ("cell", "--max-turns 0", "task", "at least 1"),
        ("cell", "--bogus", "task", "unrecognized arguments"),
        ("cell", "", "   \n", "the cell is empty"),
        ("cell", "context", "task", "only options"),
        ("cell", "--out 1x", "task", "variable name"),
        ("line", "contxt", None, "Did you mean 'context'"),
        ("line", "history extra", None, "takes no arguments"),
        ("line", "context -s nosuch", None, "no session 'nosuch'"),
        ("compact", "--strategy", None, "needs a value"),
        ("compact", "--strategy nope", None, "unknown strategy 'nope'"),
        ("compact", "--force", None, "unknown option"),
        ("compact", "-s nosuch", None, "run a %%agent cell first"),
    ],
)
def test_bad_arguments_raise_usage_errors(ip, api, kind, line, cell, message):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "warm up")
    with pytest.raises(UsageError, match=message), capture_output():
        if kind == "cell":
            ip.run_cell_magic("agent", line, cell)
        elif kind == "line":
            ip.run_line_magic("agent", line)
        else:
            ip.run_line_magic("compact", line)


def test_two_named_sessions_stay_independent(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "-s a --max-turns 1", "task for a")
        ip.run_cell_magic("agent", "-s b --max-turns 1", "task for b")
        ip.run_line_magic("compact", "-s a focus=only a")
    sessions = magics(ip).sessions
    assert sessions["a"].state.compact_count == 1
    assert sessions["b"].state.compact_count == 0
    assert sessions["a"].session_id != sessions["b"].session_id
    assert sessions["b"].messages[0]["content"][0]["text"] == "task for b"
    assert "task for a" not in json.dumps(sessions["b"].messages)


def test_config_changes_reach_the_next_call(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    ip.run_line_magic("config", "AgentMagics.max_tokens = 1234")
    ip.run_line_magic("config", "AgentMagics.keep_recent = 1")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")
    assert api.accepted[0]["max_tokens"] == 8192
    assert api.accepted[-1]["max_tokens"] == 1234
    assert magics(ip).sessions["default"].policy.keep_recent == 1


def test_summaries_in_context_and_eager_clearing_are_settings(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "first")
    ip.run_line_magic("config", "AgentMagics.summary_in_context = True")
    ip.run_line_magic("config", "AgentMagics.cache_aware = False")
    with capture_output():
        ip.run_line_magic("compact", "focus=the plan")
    asked = api.accepted[-1]
    assert asked["tool_choice"] == {"type": "none"} and asked["tools"] == api.accepted[0]["tools"]
    assert "the plan" in asked["messages"][-1]["content"][-1]["text"]
    session = magics(ip).sessions["default"]
    assert session.state.compact_count == 1 and "the plan" in (session.state.last_summary or "")
    assert session.policy.summary_in_context and not session.policy.cache_aware


def cache_markers(body: dict) -> list[dict]:
    """Every cache_control of a request (tools, system blocks, message blocks)."""
    blocks = [*body.get("tools", [])]
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body["messages"]:
        if isinstance(message["content"], list):
            blocks += message["content"]
    return [block["cache_control"] for block in blocks if "cache_control" in block]


def test_caching_settings_reach_the_requests(ip, api):
    with capture_output() as captured:
        ip.run_cell_magic("agent", "--max-turns 2", "first")
    assert cache_markers(api.accepted[0])  # on by default, 5-minute TTL
    assert all(marker == {"type": "ephemeral"} for marker in cache_markers(api.accepted[0]))
    assert "cache hit rate" in captured.stdout and "so far" in captured.stdout  # the footer
    ip.run_line_magic("config", "AgentMagics.cache_ttl = '1h'")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")
    assert cache_markers(api.accepted[-1])
    assert all(marker["ttl"] == "1h" for marker in cache_markers(api.accepted[-1]))
    ip.run_line_magic("config", "AgentMagics.caching = False")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "third")
    assert cache_markers(api.accepted[-1]) == []
    ip.run_line_magic("config", "AgentMagics.cache_ttl = '10m'")  # refused (and logged)
    assert magics(ip).cache_ttl == "1h"


def test_agent_context_shows_cost_and_cache_hits_with_the_prices_given(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    session = magics(ip).sessions["default"]
    with capture_output() as captured:
        ip.run_line_magic("agent", "context")
    line = next(row for row in captured.stdout.splitlines() if row.startswith("cost:"))
    assert f"${session.cost_usd:.4f} so far" in line
    assert f"cache hit rate {session.usage.cache_hit_rate:.0%}" in line
    ip.run_line_magic(
        "config", "AgentMagics.prices = {'claude-sonnet-5-5': {'input': 200, 'output': 1000}}"
    )
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Once more.")
    assert session.prices.lookup("claude-sonnet-5-5").input == 200
    last = [e for e in ip.user_ns["_agent"].events if e.kind == "model_response"][-1]
    dear = call_cost(last.usage, last.model, session.prices)
    assert last.cost_usd == dear.total > 10 * call_cost(last.usage, last.model).total
    ip.run_line_magic("config", "AgentMagics.prices = {'claude-sonnet-5-5': {'inputs': 1}}")
    with pytest.raises(UsageError, match="AgentMagics.prices.*unknown field"):
        ip.run_cell_magic("agent", "", "Again.")


def test_offline_option_and_subcommands(ip, monkeypatch):
    with capture_output() as captured:
        ip.run_cell_magic("agent", "--offline --max-turns 2", "Look around.")
    assert "[offline model]" in captured.stdout
    with capture_output() as captured:
        ip.run_line_magic("agent", "context")
        ip.run_line_magic("agent", "sessions")
    assert "offline scripted stand-in" in captured.stdout
    assert "default:" in captured.stdout
    config = ip.run_line_magic("agent", "config")
    assert "context_limit" in repr(config) and "<table>" in config._repr_html_()
    assert ip.run_line_magic("agent", "last").stop_reason == "max_turns"
    with capture_output():
        ip.run_line_magic("agent", "reset")
    assert magics(ip).sessions["default"].messages == []


def test_help_documents_the_options(ip):
    doc = ip.find_cell_magic("agent").__doc__
    for option in ("--session", "--model", "--offline", "--max-turns", "--expand", "context"):
        assert option in doc
    assert "ends in `?`" in ip.find_line_magic("compact").__doc__ or "ending in `?`" in (
        ip.find_line_magic("compact").__doc__
    )


def test_model_error_is_shown_plainly_and_history_stays_valid(ip, monkeypatch):
    from fake_api import server_error

    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        server.queue(reply(tool_use("bash", {"command": "echo hi"})), *[server_error()] * 3)
        with capture_output(), pytest.raises(Exception) as info:
            ip.run_cell_magic("agent", "", "Run something.")
        shown = info.value._render_traceback_()[0]
        assert shown.startswith("AgentError: API error 500")
        assert shown.endswith(
            "The history is kept (3 messages); the next cell continues the conversation."
        )
        assert ".." not in shown
        session = magics(ip).sessions["default"]
        assert validate_messages(session.messages) is None
        server.queue(reply(text("fine")))
        with capture_output():
            ip.run_cell_magic("agent", "", "Again.")
        assert ip.user_ns["_agent"].text == "fine"
        server.assert_no_rejections()


KEEP_LAST_TURNS = inspect.getsource(KeepLastTurns)  # pasted into a cell as it is


def test_a_strategy_pasted_into_the_notebook_runs_through_agent_cells(ip, api):
    ip.run_cell(KEEP_LAST_TURNS)
    ip.run_line_magic("config", 'AgentMagics.strategies = ["micro", "KeepLastTurns(n=1)"]')
    ip.run_line_magic("config", "AgentMagics.context_limit = 4000")
    with capture_output() as captured:
        ip.run_cell_magic("agent", "", "Survey the project.")
        ip.run_cell_magic("agent", "", "Survey it again.")
    session = magics(ip).sessions["default"]
    assert [s.name for s in session.strategies] == ["micro", "keep-last-turns"]
    records = [json.loads(line) for line in session.transcript.path.read_text().splitlines()]
    done = [r for r in records if r["kind"] == "compaction" and r["success"]]
    assert done and {r["strategy"] for r in done} == {"keep-last-turns"}
    assert "compaction (auto, keep-last-turns)" in captured.stdout
    listing = repr(ip.run_line_magic("agent", "strategies"))
    assert "clear-tool-uses(trigger_tokens=100000" in listing
    assert "this session runs: micro(" in listing and "keep-last-turns(n=1)" in listing
    ip.run_line_magic("config", 'AgentMagics.strategies = ["nope"]')
    with pytest.raises(UsageError, match="unknown strategy 'nope'"), capture_output():
        ip.run_cell_magic("agent", "", "Once more.")


def test_compact_preview_changes_nothing(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
    session = magics(ip).sessions["default"]
    before = json.dumps(session.messages)
    preview = ip.run_line_magic("compact", "--preview focus=the notes")
    assert "preview of summarise (over_limit): replaces" in repr(preview)
    assert "stand-in summary" in repr(preview)
    assert json.dumps(session.messages) == before and summary_requests(api) == []


def test_the_readme_settings_table_is_made_from_the_traits():
    from evo_magic.notebook.magics import settings_markdown

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert settings_markdown() in readme
