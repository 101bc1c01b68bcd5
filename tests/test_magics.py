"""The magics in a real InteractiveShell, talking to the loopback fake through the real SDK."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output
from support.example_strategy import KeepLastTurns
from support.fake_api import FakeAnthropic, reply, text, tool_use, validate_messages
from support.kernels import kernel

from evo_magic.cost import call_cost
from evo_magic.notebook.magics import AgentMagics, CompactArgs, parse_compact_line

FOCUS = "keep the {braces} and $dollars"


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


def test_loading_imports_neither_anthropic_nor_pandas_nor_the_core_loop():
    # The agent's loop, its strategies and the SDK load with the first session, so that
    # %load_ext costs little more than a bare shell (benchmarks/bench_load.py).
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'evo_magic')\n"
        "assert 'agent' in shell.magics_manager.magics['cell']\n"
        "print(json.dumps([m for m in ('anthropic', 'pandas', 'ipywidgets', 'dask', 'distributed',"
        " 'evo_magic.session', 'evo_magic.loop', 'evo_magic.strategies') if m in sys.modules]))"
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
        ('focus="quoted, with  two spaces"', CompactArgs(focus="quoted, with  two spaces")),
        (
            '--strategy "sliding-window(keep=2)" x',
            CompactArgs(focus="x", strategy="sliding-window(keep=2)"),
        ),
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


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('focus="a" focus="b"', "a second focus="),
        ('"unclosed', "unterminated quote"),
        ('focus="unclosed', "not closed"),
        ('focus="the plan" and more', "'and more' after the quoted focus"),
        ("stray focus=the plan", "words before focus="),
        ("--strategy", "expected one argument"),
        ("--force", "unrecognized arguments"),
    ],
)
def test_parse_compact_line_refuses_what_it_cannot_read(line, message):
    with pytest.raises(UsageError, match=message):
        parse_compact_line(line)


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
        ("compact", "--strategy", None, "expected one argument"),
        ("compact", "--strategy nope", None, "%compact --strategy: unknown strategy 'nope'"),
        ("compact", "--strategy 'micro(keep_recnt=2)'", None, "%compact --strategy: .*keep_recnt"),
        ("compact", "--force", None, "unrecognized arguments"),
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


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ('"micro(keep_recent="', "'micro(keep_recent=' is not a strategy spec"),
        ("nope", "unknown strategy 'nope'"),
        ("'micro(keep_recnt=2)'", "keep_recnt"),
    ],
)
def test_a_bad_strategy_spec_is_one_line_naming_the_option(ip, api, spec, why):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "warm up")
    with capture_output() as captured:
        ip.run_cell(f"%compact --strategy {spec}")
    (shown,) = (captured.stdout + captured.stderr).strip().splitlines()
    assert shown.startswith("UsageError: %compact --strategy: ") and why in shown


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
    specs = ["large-outputs", "micro(keep_recent=1)", "summarise"]
    ip.run_line_magic("config", f"AgentMagics.strategies = {specs!r}")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")
    assert api.accepted[0]["max_tokens"] == 8192
    assert api.accepted[-1]["max_tokens"] == 1234
    micro = magics(ip).sessions["default"].strategies[1]
    assert (micro.name, micro.keep_recent) == ("micro", 1)


def test_a_retired_setting_is_refused_saying_how_to_set_it_now(ip, caplog):
    """0.1's `%config AgentMagics.keep_recent = 1` is micro's parameter now: refused (logged in
    one line, as %config says a refusal), the strategies unchanged, and the message gives the
    setting that does it."""
    before = list(magics(ip).strategies)
    with caplog.at_level("ERROR"):
        ip.run_line_magic("config", "AgentMagics.keep_recent = 1")
    said = [r.getMessage() for r in caplog.records if "keep_recent" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0]
    assert "AgentMagics.strategies = ['large-outputs', 'micro(keep_recent=1)'" in said[0]
    assert list(magics(ip).strategies) == before


def test_summaries_in_context_and_eager_clearing_are_settings(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "first")
    ip.run_line_magic("config", "AgentMagics.summary_in_context = True")
    eager = ["large-outputs", "micro(cache_aware=False)", "summarise"]
    ip.run_line_magic("config", f"AgentMagics.strategies = {eager!r}")
    with capture_output():
        ip.run_line_magic("compact", "focus=the plan")
    asked = api.accepted[-1]
    assert asked["tool_choice"] == {"type": "none"} and asked["tools"] == api.accepted[0]["tools"]
    assert "the plan" in asked["messages"][-1]["content"][-1]["text"]
    session = magics(ip).sessions["default"]
    assert session.state.compact_count == 1 and "the plan" in (session.state.last_summary or "")
    assert session.policy.summary_in_context and not session.strategies[1].cache_aware


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


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('strategies = ["no-such-strategy"]', "AgentMagics.strategies: unknown strategy"),
        ('strategies = ["micro(keep_recnt=2)"]', "AgentMagics.strategies: .*keep_recnt"),
        (
            "prices = {'claude-sonnet-5-5': {'inptu': 1}}",
            r"AgentMagics.prices: .*unknown field\(s\) \['inptu'\]",
        ),
        ("sandbox = 'bogus'", "AgentMagics.sandbox must be one of 'require', 'warn', 'off'"),
        ("max_failures = 0", "AgentMagics.max_failures must be at least 1"),
        ("cache_ttl = '10m'", "AgentMagics.cache_ttl must be one of '5m', '1h'"),
        ("sandbox_network = 'no'", "AgentMagics.sandbox_network: .*must be 'on' or 'off'"),
        ("bash_processes = 2", "AgentMagics.bash_processes: .*integer >= 8"),
    ],
)
def test_a_bad_setting_is_refused_when_it_is_set(ip, api, caplog, line, said):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    session = magics(ip).sessions["default"]
    before = (session.settings, session.strategies)
    name = line.split()[0]
    default = getattr(magics(ip), name)
    ip.run_line_magic("config", f"AgentMagics.{line}")
    (refusal,) = [r.getMessage() for r in caplog.records if "AgentMagics" in r.getMessage()]
    assert re.search(said, refusal) and refusal.endswith("The setting is unchanged.")
    assert getattr(magics(ip), name) == default
    assert (session.settings, session.strategies) == before
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")  # runs with what it had
    assert api.accepted[-1]["messages"][-1]["content"][0]["text"] == "second"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("workspace", "/nonexistent", "workspace must be an existing directory.*'/nonexistent'"),
        ("workspace", "notes.txt", "workspace must be an existing directory.*'notes.txt'"),
        ("transcripts_root", "notes.txt", "transcripts_root must be .*'notes.txt' is a file"),
        ("transcripts_root", "notes.txt/runs", "transcripts_root must be .*'notes.txt' is a file"),
    ],
)
def test_a_path_that_cannot_work_is_refused_when_it_is_set(ip, caplog, name, value, said):
    Path("notes.txt").write_text("a file, not a directory")
    ip.run_line_magic("config", f"AgentMagics.{name} = {value!r}")
    (refusal,) = [r.getMessage() for r in caplog.records if "AgentMagics" in r.getMessage()]
    assert re.match(f"AgentMagics.{said}", refusal) and "\n" not in refusal
    assert refusal.endswith("The setting is unchanged.") and getattr(magics(ip), name) == ""
    with pytest.raises(UsageError, match=said):
        setattr(magics(ip), name, value)


def test_a_transcripts_root_yet_to_be_made_is_made(ip, api, tmp_path):
    root = tmp_path / "not" / "yet"
    ip.run_line_magic("config", f"AgentMagics.transcripts_root = {str(root)!r}")
    ip.run_line_magic("config", "AgentMagics.workspace = '.'")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    assert magics(ip).sessions["default"].transcript_path.is_relative_to(root)


def test_the_sandbox_settings_reach_the_session_through_config(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    ip.run_line_magic("config", "AgentMagics.bash_memory = None")
    ip.run_line_magic("config", "AgentMagics.bash_env_keep = ['HF_TOKEN']")
    bash = magics(ip).sessions["default"].settings.bash
    assert bash.memory is None and bash.env_keep == ("HF_TOKEN",)


def test_a_bad_setting_assigned_in_code_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="AgentMagics.strategies: unknown strategy 'nope'"):
        magics(ip).strategies = ["nope"]
    with pytest.raises(UsageError, match="AgentMagics.display_mode must be"):
        magics(ip).display_mode = "fancy"
    assert magics(ip).strategies == [] and magics(ip).display_mode == "plain"


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ("sliding-window(keep=-1)", "sliding-window.keep must be at least 1, got -1"),
        ("micro(keep_recent=-3)", "micro.keep_recent must be at least 0, got -3"),
        ('observation-masking(keep_turns="x")', "observation-masking.keep_turns must be a whole"),
        ("server-compact(trigger_tokens=1000)", "server-compact.trigger_tokens must be at least"),
    ],
)
def test_a_bad_strategy_parameter_is_refused_at_config_time_whole(ip, api, caplog, spec, rule):
    """A parameter a strategy refuses is refused when the setting is made: one line naming
    the setting, the spec, the parameter and the rule; the setting keeps its value, and the
    next cell runs (and records) what ran before."""
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    session = magics(ip).sessions["default"]
    before = [s.name for s in session.strategies]
    with caplog.at_level("ERROR"):
        ip.run_line_magic("config", f"AgentMagics.strategies = ['large-outputs', {spec!r}]")
    (said,) = [r.getMessage() for r in caplog.records if rule in r.getMessage()]
    assert said.startswith("AgentMagics.strategies: ") and repr(spec) in said
    assert "\n" not in said and "The setting is unchanged." in said
    assert magics(ip).strategies == []
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")
    assert [s.name for s in session.strategies] == before
    assert magics(ip).sessions["default"] is session  # no new session died making it


def test_a_setting_reset_to_its_default_reaches_existing_sessions(ip, api):
    ip.run_line_magic("config", "AgentMagics.system_prompt = 'Answer in one word.'")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    assert "Answer in one word." in json.dumps(api.accepted[-1]["system"])
    ip.run_line_magic("config", "AgentMagics.system_prompt = ''")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "second")
    assert "Answer in one word." not in json.dumps(api.accepted[-1]["system"])
    assert "careful coding agent" in json.dumps(api.accepted[-1]["system"])


def test_agent_strategies_shows_what_the_next_call_runs(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "first")
    calls = len(api.accepted)
    ip.run_line_magic("config", 'AgentMagics.strategies = ["sliding-window(keep=4)"]')
    listing = repr(ip.run_line_magic("agent", "strategies"))
    assert listing.endswith("this session runs: sliding-window(keep=4)")
    ip.run_line_magic("config", "AgentMagics.strategies = []")
    listing = repr(ip.run_line_magic("agent", "strategies"))
    runs = listing.splitlines()[-1]
    assert runs == "this session runs: large-outputs, micro, summarise"
    assert len(api.accepted) == calls  # no model call in between
    records = [
        json.loads(line)
        for line in magics(ip).sessions["default"].transcript_path.read_text().splitlines()
    ]
    assert [r["strategies"][0]["name"] for r in records if r["kind"] == "strategies"] == [
        "sliding-window",
        "large-outputs",
    ]


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


def test_help_is_the_magic_arguments_once(ip):
    from evo_magic.notebook.config import AgentConfig
    from evo_magic.notebook.magics import SUBCOMMANDS

    agent, compact = ip.find_cell_magic("agent"), ip.find_line_magic("compact")
    for magic in (agent, compact):
        parser = magic.parser
        for action in parser._actions:  # every option's help, once, in %magic?
            flat = " ".join(magic.__doc__.split())
            text = action.help.replace("%%", "%")  # argparse's escape
            assert flat.count(" ".join(text.split())) == 1, action.dest
    flat = " ".join(agent.__doc__.split())
    for name, text in SUBCOMMANDS.items():
        assert flat.count(" ".join(text.split())) == 1, name
    assert flat.count("usage") <= 1 and "%%agent [-s" not in flat  # no hand-made usage line
    assert "ending in `?`" in compact.__doc__
    # every setting's help is the trait's, made from the one field
    for name, trait in AgentConfig.class_traits(config=True).items():
        assert trait.help and f"--AgentMagics.{name}=" in magics(ip).class_get_help()


@pytest.mark.parametrize("mode", ["plain", "rich"])
def test_an_interrupt_is_said_once(ip, mode, monkeypatch):
    import os
    import signal

    from evo_magic.events import ToolStarted

    ip.run_line_magic("config", f"AgentMagics.display_mode = '{mode}'")
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        server.queue(reply(text("Running it."), tool_use("bash", {"command": "sleep 30"})))
        session = magics(ip).registry.get("default")
        # The user presses interrupt as the tool starts (SIGINT, as a kernel interrupt sends).
        session.subscribe(
            lambda e: os.kill(os.getpid(), signal.SIGINT) if isinstance(e, ToolStarted) else None
        )
        with capture_output() as captured:
            outcome = ip.run_cell("%%agent\nRun the slow command.")
        server.assert_no_rejections()
    assert isinstance(outcome.error_in_exec, KeyboardInterrupt)  # it still stops "Run all"
    said = (
        "Interrupted: the history is kept (3 messages); the next cell continues the conversation."
    )
    if mode == "plain":
        assert captured.stdout.lower().count("interrupted") == 1
        assert captured.stdout.splitlines()[-1] == said
    else:
        (shown,) = [line for line in captured.stdout.splitlines() if line]
        assert shown == said
        views = [
            o.data for o in captured.outputs if "evo-magic-cell" in o.data.get("text/html", "")
        ]
        assert "Running it." in views[-1]["text/plain"]
        assert not any("nterrupted" in view["text/plain"] + view["text/html"] for view in views)
    assert validate_messages(session.messages) is None


def test_model_error_is_shown_plainly_and_history_stays_valid(ip, monkeypatch):
    from support.fake_api import server_error

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
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    done = [r for r in records if r["kind"] == "compaction" and r["success"]]
    assert done and {r["strategy"] for r in done} == {"keep-last-turns"}
    assert "compaction (auto, keep-last-turns)" in captured.stdout
    listing = repr(ip.run_line_magic("agent", "strategies"))
    assert "  clear-tool-uses  [every_call]" in listing
    assert "      trigger_tokens=100000  Clear when the prompt is over" in listing
    assert listing.endswith("this session runs: micro, keep-last-turns(n=1)")


def test_compact_preview_changes_nothing(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
    session = magics(ip).sessions["default"]
    before = json.dumps(session.messages)
    preview = ip.run_line_magic("compact", "--preview focus=the notes")
    assert "preview of summarise (over_limit): replaces" in repr(preview)
    assert "stand-in summary" in repr(preview)
    assert json.dumps(session.messages) == before and summary_requests(api) == []


def test_the_docs_tables_are_made_from_the_one_source():
    from dataclasses import fields

    from evo_magic.notebook.config import settings_markdown
    from evo_magic.notebook.magics import magics_markdown
    from evo_magic.settings import SessionSettings, setting_fields

    root = Path(__file__).parent.parent
    page = (root / "docs" / "notebook.md").read_text()
    readme = (root / "README.md").read_text()
    # A new setting or option: python -m evo_magic.doc_tables README.md docs/notebook.md
    assert settings_markdown() in page, "python -m evo_magic.doc_tables docs/notebook.md"
    assert magics_markdown() in page, "python -m evo_magic.doc_tables docs/notebook.md"
    assert magics_markdown() in readme, "python -m evo_magic.doc_tables README.md"
    for _owner, f in setting_fields():  # each field is a row with its own default and help
        assert f"| `{f.name}` |" in settings_markdown()
        assert f.metadata["help"].replace("|", "\\|") in settings_markdown()
    assert {f.name for f in fields(SessionSettings)} - {"policy", "cache_static_ttl"} <= {
        f.name for _, f in setting_fields()
    }


def test_a_missing_key_says_so_and_how_to_set_it(ip):
    with capture_output(), pytest.raises(Exception) as info:
        ip.run_cell_magic("agent", "-m claude-sonnet-5-5", "Hello.")
    (shown,) = info.value._render_traceback_()
    assert shown.startswith("AgentError: No Anthropic API key for claude-sonnet-5-5")
    assert "ANTHROPIC_API_KEY" in shown and "--offline" in shown
    assert "Malformed" not in shown and "authentication method" not in shown


def test_switching_models_makes_no_false_adjusted_notes(ip):
    with capture_output() as captured:
        for _ in range(2):
            with pytest.raises(Exception, match="No Anthropic API key"):
                ip.run_cell_magic("agent", "-m claude-sonnet-5-5", "Hello.")
            ip.run_cell_magic("agent", "--offline -t 2", "Look around.")
            ip.run_line_magic("compact", "")
    assert captured.stdout.count("2 model calls, stop: max_turns") == 2
    assert "adjusted" not in captured.stdout
    session = magics(ip).sessions["default"]
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    assert not [r for r in records if r.get("code") == "reply_normalised"]


def _watch(read, seconds: float = 8.0):
    """Sample `read()` every 0.1 s from another thread (what a user sees while a cell runs)."""
    import threading
    import time

    seen: list = []
    stop = threading.Event()

    def sample() -> None:
        end = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < end:
            seen.append(read())
            time.sleep(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return seen, lambda: (stop.set(), thread.join())


@pytest.mark.slow  # it waits seconds on purpose: the line ticks from 2 s on
@pytest.mark.parametrize("mode", ["plain", "rich"])
def test_a_tool_line_shows_when_the_tool_starts_and_ends_when_it_ends(ip, mode, monkeypatch):
    ip.run_line_magic("config", f"AgentMagics.display_mode = '{mode}'")
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        server.queue(reply(tool_use("bash", {"command": "sleep 3.3"})), reply(text("done")))
        with capture_output() as captured:
            if mode == "plain":
                seen, stop = _watch(lambda: sys.stdout.getvalue())
            else:
                seen, stop = _watch(
                    lambda: [o.data.get("text/plain", "") for o in list(captured.outputs)]
                )
            ip.run_cell_magic("agent", "", "Wait a little.")
            stop()
        server.assert_no_rejections()
    if mode == "plain":
        running = [s for s in seen if "bash: sleep 3.3" in s and "-> ok" not in s]
        assert running and running[-1].endswith("  · bash: sleep 3.3")
        assert re.search(r"  · bash: sleep 3\.3 -> ok, \d+ chars, 3\.\d\ds\n", captured.stdout)
    else:
        shown = [text for outputs in seen for text in outputs]
        assert any("bash: sleep 3.3 …" in t and "-> ok" not in t for t in shown)
        ticks = {m for t in shown for m in re.findall(r"bash: sleep 3\.3 … (\d)s", t)}
        assert {"2", "3"} <= ticks  # the seconds it has run, from 2 s on
        final = [o.data["text/plain"] for o in captured.outputs if "bash: sleep" in str(o.data)][-1]
        assert "bash: sleep 3.3 -> ok" in final and " … " not in final


def test_the_text_view_closes_a_line_something_interrupts():
    from evo_magic.events import Notice, ToolFinished, ToolStarted
    from evo_magic.render import TextRenderer

    written: list[str] = []
    view = TextRenderer(written.append)
    view(ToolStarted("toolu_1", "bash", {"command": "make"}, "make"))
    assert "".join(written) == "  · bash: make"
    view(Notice("sandbox", "bash runs unsandboxed"))
    view(ToolFinished("toolu_1", "bash", {"command": "make"}, "built", False, 1.5, "make"))
    assert "".join(written).splitlines() == [
        "  · bash: make …",
        "  · note: bash runs unsandboxed",
        "  · bash: make -> ok, 5 chars, 1.50s",
    ]


def test_a_one_character_output_reads_as_one_char():
    from evo_magic.events import ToolFinished
    from evo_magic.render import tool_line

    done = ToolFinished("toolu_1", "bash", {"command": "printf 1"}, "1", False, 0.01, "printf 1")
    assert tool_line(done) == "bash: printf 1 -> ok, 1 char, 0.01s"


def test_nothing_to_compact_is_a_neutral_line_said_once_and_a_skipped_record(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Look around.")
    with capture_output() as captured:
        ip.run_line_magic("compact", "--strategy micro")  # no old tool result to clear
    assert captured.stdout.splitlines() == [
        "  · nothing to compact (user): no strategy found anything to do"
    ]
    session = magics(ip).sessions["default"]
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    (skipped,) = [r for r in records if r["kind"] == "compaction_skipped"]
    assert skipped["reason"] == "no strategy found anything to do"
    assert skipped["strategy"] == "micro" and skipped["trigger"] == "user"
    assert not [r for r in records if r["kind"] == "compaction"]
    assert session.state.consecutive_failures == 0


def test_the_focus_is_echoed_as_typed(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 2", "Look around.")
    with capture_output() as captured:
        ip.run_line_magic("compact", r"focus=keep C:\data\new and the user's notes")
    assert r"""focus "keep C:\data\new and the user's notes": """ in captured.stdout


def test_counts_read_as_english(ip, api):
    with capture_output() as captured:
        ip.run_cell_magic("agent", "--max-turns 1", "Look around.")
    footer = captured.stdout.splitlines()[-1]
    assert footer.startswith("  · 1 model call, stop: max_turns;")
    assert footer.endswith("; 0 compactions")
    assert re.search(r"context [2-9] messages, ", footer)
    assert "  · note: Stopped after 1 model call (max_turns=1); " in captured.stdout
    with capture_output() as captured:
        ip.run_line_magic("agent", "sessions")
    assert "0 compactions" in captured.stdout and "(s)" not in captured.stdout


def test_an_empty_history_reads_as_empty(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "Look around.")
        ip.run_line_magic("agent", "reset")
    with capture_output() as captured:
        ip.run_line_magic("agent", "context")
        ip.run_line_magic("agent", "sessions")
    lines = captured.stdout.splitlines()
    context = next(line for line in lines if line.startswith("context:"))
    assert context.startswith("context: empty, 0 chars, ~")  # the JSON `[]` is no content
    assert lines[-1].startswith("default: ") and ", empty, 0 chars, ~" in lines[-1]
    assert "0 messages" not in captured.stdout and " 2 chars" not in captured.stdout


def test_the_offline_model_never_counts_past_its_last_step(workspace):
    from evo_magic.session import Session

    session = Session(workspace, model="offline")
    session.ask("Survey the project.")
    event = session.compact()
    assert "Remaining work: none: all 6 steps of the script are done." in event.summary
    assert "step 7" not in event.summary


def test_a_bad_setting_in_the_config_file_is_refused_and_the_others_apply(
    tmp_path, workspace, caplog
):
    shell = start_ipython() or InteractiveShell.instance()
    shell.config.AgentMagics.context_limit = 1234
    shell.config.AgentMagics.sandbox = "bogus"
    shell.config.AgentMagics.strategies = ["micro(keep_recent=1)"]
    try:
        shell.run_line_magic("load_ext", "evo_magic")
        loaded = magics(shell)
        assert loaded.context_limit == 1234 and loaded.sandbox == "warn"
        assert [s.name for s in loaded.configured_strategies()] == ["micro"]
        refusals = [r.getMessage() for r in caplog.records if "AgentMagics" in r.getMessage()]
        assert refusals == [
            "AgentMagics.sandbox must be one of 'require', 'warn', 'off', got 'bogus'. "
            "The setting is unchanged."
        ]
    finally:
        shell.run_line_magic("unload_ext", "evo_magic")
        shell.config.pop("AgentMagics", None)


def test_compact_keeps_the_model_the_last_cell_ran(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--offline --max-turns 2", "Look around.")
    session = magics(ip).sessions["default"]
    start = json.loads(session.transcript_path.read_text().splitlines()[0])
    assert start["kind"] == "session_start" and start["model"] == "offline"
    with capture_output() as captured:
        ip.run_line_magic("compact", "")
    assert session.model.name == "offline" and "compaction (user)" in captured.stdout
    assert api.accepted == []  # the summary was the stand-in's, not a call to the API
    ip.run_line_magic("config", "AgentMagics.offline = True")
    ip.run_line_magic("config", "AgentMagics.offline = False")  # the setting names the model
    assert session.model.name == "claude-sonnet-5-5"


def test_compact_takes_a_quoted_strategy_spec(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
    session = magics(ip).sessions["default"]
    before = len(session.messages)
    with capture_output() as captured:
        ip.run_line_magic("compact", '--strategy "sliding-window(keep=2)" focus=the notes')
    assert "compaction (user, sliding-window)" in captured.stdout
    assert len(session.messages) < before


@pytest.mark.slow
def test_a_running_tool_ticks_in_a_real_kernel(workspace):
    """The seconds of a running tool reach the cell's output through ipykernel (the updates
    come from a thread while the cell's thread runs the tool)."""
    with FakeAnthropic() as api:
        api.queue(reply(tool_use("bash", {"command": "sleep 3.3"})), reply(text("done")))
        env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-test-kernel-00"}
        with kernel(workspace, **env) as (_, kc):
            setup = "%load_ext evo_magic\n%config AgentMagics.display_mode = 'rich'"
            assert kc.execute_interactive(setup, timeout=60)["content"]["status"] == "ok"
            shown: list[dict] = []
            done = kc.execute_interactive(
                "%%agent\nWait a little.", timeout=120, output_hook=shown.append
            )
            assert done["content"]["status"] == "ok"
            api.assert_no_rejections()
    cell = done["parent_header"]["msg_id"]
    updates = [
        m["content"]["data"].get("text/plain", "")
        for m in shown
        if m["msg_type"] == "update_display_data" and m["parent_header"]["msg_id"] == cell
    ]
    ticks = {t for u in updates for t in re.findall(r"bash: sleep 3\.3 … (\d)s", u)}
    assert {"2", "3"} <= ticks
    assert any("bash: sleep 3.3 -> ok" in u for u in updates)


def test_compact_again_right_after_a_compaction_is_nothing_to_compact_not_a_failure(ip, api):
    """A second `%compact` with nothing new since the first would summarise the summary: it
    was shown and recorded as FAILED ("would not be smaller") while `--preview` promised a
    smaller history. Now both say there is nothing new, and a new cell compacts again."""
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
        ip.run_line_magic("compact", "focus=the plan")
    session = magics(ip).sessions["default"]
    assert session.state.compact_count == 1
    preview = ip.run_line_magic("compact", "--preview")
    assert "nothing to do now (nothing new since the last compaction by summarise)" in repr(preview)
    with capture_output() as again:
        ip.run_line_magic("compact", "")
    assert again.stdout.splitlines() == [
        "  · nothing to compact (user): nothing new since the last compaction by summarise"
    ]
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    assert [r["success"] for r in records if r["kind"] == "compaction"] == [True]
    assert [r["kind"] for r in records].count("compaction_skipped") == 1
    assert session.state.compact_count == 1 and session.state.consecutive_failures == 0
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 1", "One more thing.")
        ip.run_line_magic("compact", "")
    assert session.state.compact_count == 2
