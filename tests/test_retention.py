"""Retention: what each strategy keeps and loses of a recorded session, from replay's own pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import _Writer
from support.fake_api import FakeAnthropic
from support.responders import offline_responder
from support.sandbox import sandbox_here

from evo_magic import Fact, load_transcripts, replay, retention
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import COMPACTED_HEADER
from evo_magic.models import AnthropicModel, FunctionModel, ModelRequest, OfflineModel
from evo_magic.probe import answer_from_context, block_text, normalise, probe_question
from evo_magic.session import Session
from evo_magic.strategies import ObservationMasking, SlidingWindow

FIRST_PROMPT = (
    "Tidy up the config loader. Never touch the file legacy.py. "
    "The codename for this job is BLUE-HERON-7."
)
INSTRUCTION = "Never touch the file legacy.py."
CODENAME = "BLUE-HERON-7"
VALUE = "MAGIC_OFFSET = 4096"
ERROR = "ValueError: bad checksum 0xBEEF"
FILLERS = 8
PLANTED = [
    Fact(INSTRUCTION, kind="instruction"),
    CODENAME,
    Fact(VALUE, question="What is MAGIC_OFFSET set to?", answer="4096"),
    Fact(ERROR, kind="error"),
]


def _script(request: ModelRequest) -> list[dict[str, Any]]:
    """Read config.py, run a failing check, then read filler files, then answer."""
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    if step == 0:
        return [_tool("t_read", "read_file", path="config.py")]
    if step == 1:
        command = (
            'python3 -c "import json; print(json.dumps(list(range(40))))"; '
            "python3 -c \"raise ValueError('bad checksum 0xBEEF')\""
        )
        return [_tool("t_check", "bash", command=command)]
    if step < 2 + FILLERS:
        return [_tool(f"t_fill{step}", "read_file", path=f"filler/part{step}.txt")]
    return [{"type": "text", "text": "Done: the loader is tidy."}]


def _tool(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session recorded by a real Session: the instruction and codename in the first prompt,
    a value and an error in the first tool results, filler after."""
    workspace = tmp_path_factory.mktemp("planted")
    notes = "".join(
        f"# note {i}: the loader reads settings from the environment\n" for i in range(6)
    )
    (workspace / "config.py").write_text(
        f"{notes}{VALUE}\n\n\ndef load_config(path):\n    return {{}}\n", encoding="utf-8"
    )
    (workspace / "filler").mkdir()
    for n in range(2, 2 + FILLERS):
        text = "\n".join(f"filler line {n}.{i}: nothing of note here" for i in range(60))
        (workspace / "filler" / f"part{n}.txt").write_text(text, encoding="utf-8")
    with Session(workspace, model=FunctionModel(_script), sandbox=sandbox_here()) as session:
        session.ask(FIRST_PROMPT)
    return session.directory


def _kept(rt: Any, strategy: str) -> pd.DataFrame:
    kept = rt.kept[rt.kept["strategy"] == strategy]
    texts = rt.facts.set_index("fact_id")["text"]
    return kept.assign(text=kept["fact_id"].map(texts)).set_index("text")


def _calls(directory: Path) -> list[int]:
    return sorted(int(c) for c in load_transcripts(directory).calls["call"])


def test_none_keeps_every_fact_and_masking_loses_the_tool_results(planted: Path):
    rt = retention(
        planted,
        {"none": [], "masking-1": [ObservationMasking(1)]},
        facts=PLANTED,
        model="claude-sonnet-4-5",
    )
    calls = _calls(planted)
    facts = rt.facts.set_index("text")
    assert list(facts.index) == [INSTRUCTION, CODENAME, VALUE, ERROR]
    assert (facts["origin"] == "given").all()
    # The prompt is sent at the first call, the file's content at the second, the error's at
    # the third.
    assert list(facts["first_call"]) == [calls[0], calls[0], calls[1], calls[2]]
    none = _kept(rt, "none")
    assert none["kept_at_end"].all() and none["lost_at_call"].isna().all()
    assert (none["kept_share"] == 1.0).all()
    assert none.loc[VALUE, "last_kept_call"] == calls[-1]
    masked = _kept(rt, "masking-1")
    assert masked.loc[INSTRUCTION, "kept_at_end"] and masked.loc[CODENAME, "kept_at_end"]
    assert not masked.loc[VALUE, "kept_at_end"] and not masked.loc[ERROR, "kept_at_end"]
    # Masking keeps the last turn's results: each result is masked once the next one is in.
    assert masked.loc[VALUE, "lost_at_call"] == calls[2]
    assert masked.loc[ERROR, "lost_at_call"] == calls[3]
    assert masked.loc[VALUE, "last_kept_call"] == calls[1]
    assert set(masked.loc[[VALUE, ERROR], "lost_by"]) == {"observation-masking"}
    totals = rt.totals.set_index(["strategy", "kind"])
    assert totals.loc[("none", "all"), "kept_share"] == 1.0
    assert totals.loc[("masking-1", "all"), "kept_at_end_share"] == 0.5
    assert totals.loc[("masking-1", "instruction"), "verbatim_share"] == 1.0
    # One pass: the cost is replay's for each setting.
    replayed = replay(
        planted, {"none": [], "masking-1": [ObservationMasking(1)]}, "claude-sonnet-4-5"
    )
    costs = replayed.totals.set_index("strategy")["cost_usd"]
    assert totals.loc[("none", "all"), "cost_usd"] == pytest.approx(costs["none"])
    assert totals.loc[("masking-1", "error"), "cost_usd"] == pytest.approx(costs["masking-1"])
    # Per call: the share of the facts seen so far that the context holds.
    per_call = rt.calls[rt.calls["strategy"] == "masking-1"].set_index("call")
    assert per_call.loc[calls[0], "facts_seen"] == 2 and per_call.loc[calls[0], "kept_share"] == 1
    assert per_call.loc[calls[-1], "facts_seen"] == 4 and per_call.loc[calls[-1], "facts_kept"] == 2


def test_a_sliding_window_loses_the_middle_where_it_cuts(planted: Path):
    strategies = {"window": [SlidingWindow(keep=4)]}
    policy = CompactPolicy(context_limit=3_000)
    rt = retention(planted, strategies, facts=PLANTED, policy=policy)
    calls = replay(planted, strategies, policy=policy).calls
    grew = calls["compactions_so_far"].diff().fillna(calls["compactions_so_far"]) > 0
    cuts = [int(c) for c in calls[grew]["call"]]  # the calls before which the window cut
    assert len(cuts) >= 2
    window = _kept(rt, "window")
    assert window.loc[INSTRUCTION, "kept_at_end"] and window.loc[CODENAME, "kept_at_end"]
    # The first cut drops the file's content; the error, newer, goes at the next one.
    assert window.loc[VALUE, "lost_at_call"] == cuts[0]
    assert window.loc[ERROR, "lost_at_call"] == cuts[1]
    for text in (VALUE, ERROR):
        assert window.loc[text, "lost_by"] == "sliding-window"
        lost = window.loc[text, "lost_at_call"]
        assert window.loc[text, "last_kept_call"] == max(c for c in _calls(planted) if c < lost)


def test_the_seed_keeps_what_its_summary_repeats(planted: Path):
    seen: list[list[dict[str, Any]]] = []
    summarised: list[int] = []  # the calls before which the seed summarised

    def keep_last(replayed: Any) -> None:
        seen[:] = [list(replayed.messages)]
        if any(e.strategy == "summarise" for e in replayed.changes):
            summarised.append(replayed.call)

    policy = CompactPolicy(context_limit=3_000)
    options = {"policy": policy, "summariser": OfflineModel()}
    rt = retention(planted, {"seed": None}, facts=PLANTED, **options)
    replay(planted, {"seed": None}, on_call=keep_last, **options)
    summaries = [
        normalise(block_text(b))
        for m in seen[0]
        for b in m["content"]
        if block_text(b).startswith(COMPACTED_HEADER)
    ]
    assert summaries, "the seed compacted"
    seed = _kept(rt, "seed")
    assert seed.loc[INSTRUCTION, "kept_at_end"] and seed.loc[CODENAME, "kept_at_end"]
    assert not seed.loc[VALUE, "kept_at_end"] and not seed.loc[ERROR, "kept_at_end"]
    for text in (VALUE, ERROR):  # gone with the first summary, which did not repeat them
        assert seed.loc[text, "lost_at_call"] == summarised[0]
        assert seed.loc[text, "lost_by"] == "summarise"
    for text in (INSTRUCTION, CODENAME):
        assert any(normalise(text) in s for s in summaries), text


def test_extraction_on_our_own_session(planted: Path):
    rt = retention(planted, {"none": []})
    facts = rt.facts
    by_kind = facts.groupby("kind", observed=True)["text"].apply(list).to_dict()
    assert by_kind["instruction"] == [INSTRUCTION]
    assert "config.py" in by_kind["path"] and "filler/part2.txt" in by_kind["path"]
    assert ERROR in by_kind["error"]
    assert "def load_config(path):" in by_kind["identifier"]
    origins = facts.set_index("kind")["origin"].astype(str).groupby(level=0).first()
    assert origins.to_dict() == {
        "error": "tool_result",
        "identifier": "tool_result",
        "instruction": "user",
        "path": "assistant",
    }
    identifier = facts[facts["kind"] == "identifier"].iloc[0]
    assert identifier["answer"] == "load_config" and "def ____(path):" in identifier["question"]


def test_probes_offline_read_what_the_context_holds(planted: Path):
    rt = retention(
        planted,
        {"none": [], "masking-1": [ObservationMasking(1)]},
        facts=PLANTED,
        reader="offline",
    )
    assert rt.reader == "offline"
    totals = rt.totals.set_index(["strategy", "kind"])
    assert totals.loc[("none", "all"), "probe_accuracy"] == 1.0
    assert totals.loc[("masking-1", "all"), "probe_accuracy"] < 1.0
    assert totals.loc[("none", "all"), "probes"] == 4
    assert totals.loc[("none", "all"), "probe_cost_usd"] == 0.0
    # The given question is answered from the line that holds MAGIC_OFFSET.
    probes = rt.probes.set_index(["strategy", "fact_id"])
    value_id = rt.facts.set_index("text").loc[VALUE, "fact_id"]
    assert "4096" in probes.loc[("none", value_id), "reply"]
    assert probes.loc[("masking-1", value_id), "reply"] == "I don't know."


def test_offline_probe_accuracy_on_cloze_facts_equals_the_share_kept_at_the_end(planted: Path):
    strategies = {
        "none": [],
        "masking-1": [ObservationMasking(1)],
        "masking-3": [ObservationMasking(3)],
        "window": [SlidingWindow(keep=6)],
    }
    policy = CompactPolicy(context_limit=4_000)
    rt = retention(planted, strategies, reader=OfflineModel(), policy=policy)
    assert rt.facts["question"].str.contains("<cloze>").all()
    rows = rt.totals[rt.totals["kind"] == "all"].set_index("strategy")
    assert rows["kept_at_end_share"].nunique() > 1  # the settings differ
    for strategy, row in rows.iterrows():
        assert row["probe_accuracy"] == pytest.approx(row["kept_at_end_share"]), strategy


def test_a_function_model_answers_probes_priced_and_cached(planted: Path, tmp_path: Path):
    asked: list[str] = []

    def read(request: ModelRequest) -> dict[str, Any]:
        question = probe_question(request.messages)
        assert question is not None
        asked.append(question)
        # One question a request: the probe turn holds exactly one.
        assert request.messages[-1]["content"][-1]["text"].count("Question:") == 1
        reply = answer_from_context(request.messages, question)
        return {
            "content": [{"type": "text", "text": reply}],
            "usage": {"input_tokens": 1_000, "output_tokens": 10},
        }

    reader = FunctionModel(read, name="claude-sonnet-4-5")
    options = {"facts": PLANTED, "reader": reader, "cache_dir": tmp_path / "cache"}
    strategies = {"none": [], "masking-1": [ObservationMasking(1)]}
    first = retention(planted, strategies, **options)
    assert len(asked) == 8  # four facts, two settings
    cost = first.totals.set_index(["strategy", "kind"]).loc[("none", "all"), "probe_cost_usd"]
    assert cost == pytest.approx(8 / 2 * (1_000 * 3 + 10 * 15) / 1e6)
    again = retention(planted, strategies, **options)
    assert len(asked) == 8  # the rerun paid nothing
    pd.testing.assert_frame_equal(first.totals, again.totals)
    pd.testing.assert_frame_equal(first.probes, again.probes)


def test_replicates_give_an_interval_around_the_mean(planted: Path, tmp_path: Path):
    calls = {"n": 0}

    def unsure(request: ModelRequest) -> list[dict[str, Any]]:
        calls["n"] += 1
        question = probe_question(request.messages) or ""
        reply = answer_from_context(request.messages, question) if calls["n"] % 3 else "no idea"
        return [{"type": "text", "text": reply}]

    rt = retention(
        planted,
        {"none": []},
        facts=PLANTED,
        reader=FunctionModel(unsure),
        replicates=3,
        cache_dir=tmp_path,
    )
    row = rt.totals.set_index(["strategy", "kind"]).loc[("none", "all")]
    assert row["replicates"] == 3 and row["probes"] == 4 and len(rt.probes) == 12
    assert sorted(rt.probes["replicate"].unique()) == [0, 1, 2]
    assert 0 < row["probe_accuracy"] < 1
    assert row["probe_ci_low"] < row["probe_accuracy"] < row["probe_ci_high"]
    assert pd.isna(row["probe_cost_usd"])  # a model without a price: not priced, not zero


def test_a_judge_grades_yes_or_no(planted: Path, tmp_path: Path):
    def judge(request: ModelRequest) -> list[dict[str, Any]]:
        text = request.messages[-1]["content"][0]["text"]
        expected = text.split("Expected answer: ", 1)[1].split("\n", 1)[0]
        given = text.split("The reader's answer: ", 1)[1].split("\n\n", 1)[0]
        return [{"type": "text", "text": "Yes." if expected in given else "No."}]

    rt = retention(
        planted,
        {"none": [], "masking-1": [ObservationMasking(1)]},
        facts=PLANTED,
        reader="offline",
        judge=FunctionModel(judge, name="judge"),
        cache_dir=tmp_path,
    )
    assert rt.judge == "judge"
    rows = rt.totals[rt.totals["kind"] == "all"].set_index("strategy")
    assert rows.loc["none", "probe_accuracy"] == 1.0 > rows.loc["masking-1", "probe_accuracy"]


def test_a_real_reader_through_the_sdk_gets_valid_requests(planted: Path, tmp_path: Path):
    with FakeAnthropic(offline_responder()) as server:
        reader = AnthropicModel("claude-sonnet-4-5", client=server.client(max_retries=0))
        rt = retention(
            planted,
            {"masking-1": [ObservationMasking(1)]},
            facts=PLANTED,
            reader=reader,
            cache_dir=tmp_path,
        )
        server.assert_no_rejections()
    row = rt.totals.set_index(["strategy", "kind"]).loc[("masking-1", "all")]
    assert row["probe_accuracy"] == 0.5 and row["probe_cost_usd"] > 0


def test_frontier_draws_one_labelled_point_per_strategy(planted: Path):
    import matplotlib

    matplotlib.use("Agg")
    rt = retention(
        planted,
        {"none": [], "masking-1": [ObservationMasking(1)]},
        facts=PLANTED,
        reader="offline",
        model="claude-sonnet-4-5",
    )
    ax = rt.frontier()
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["none", "masking-1"]
    assert ax.get_xlabel() == "Cost (USD)" and ax.get_ylabel() == "Share of the facts kept"
    assert ax.containers  # the probe intervals


def test_recoverable_marks_facts_whose_output_went_to_a_file(tmp_path: Path):
    from evo_magic.strategies import LargeOutputs

    workspace = tmp_path / "work"
    workspace.mkdir()
    big = "\n".join(f"row {i}: {'x' * 60}" for i in range(400)) + f"\n{VALUE}\n"
    (workspace / "config.py").write_text(big, encoding="utf-8")

    def script(request: ModelRequest) -> list[dict[str, Any]]:
        if not any(m["role"] == "assistant" for m in request.messages):
            return [_tool("t_big", "read_file", path="config.py")]
        return [{"type": "text", "text": "Read it."}]

    with Session(workspace, model=FunctionModel(script), sandbox=sandbox_here()) as session:
        session.ask("Read config.py and tell me what MAGIC_OFFSET is.")
    rt = retention(
        session.directory,
        {"none": [], "large": [LargeOutputs(limit=5_000, preview_chars=500)]},
        facts=[VALUE],
    )
    kept = rt.kept.set_index("strategy")
    assert pd.isna(kept.loc["none", "recoverable"]) and kept.loc["none", "kept_at_end"]
    assert not kept.loc["large", "kept_at_end"]
    assert kept.loc["large", "lost_by"] == "large-outputs"
    # The path the session itself would have shown the model (replay shows what live shows).
    shown = f".evo_magic/{session.session_id}/tool-results/t_big.txt"
    assert kept.loc["large", "recoverable"] == shown


def test_claude_code_sessions(tmp_path: Path):
    """Extraction finds instructions, paths and errors in Claude Code's format."""
    import random

    writer = _Writer("cc000000-0000-4000-8000-000000000001", random.Random(1))
    writer.user(
        "Fix the failing parser test. Don't change the public API, and make sure the "
        "tests still pass."
    )
    writer.assistant(
        {"type": "text", "text": "Reading the parser."},
        _tool("toolu_1", "Read", file_path="/project/src/parser.py"),
        stop="tool_use",
    )
    writer.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "     1\u2192import re\n     2\u2192\n     3\u2192class Parser:\n"
                "     4\u2192    def parse(self, text):\n"
                "     5\u2192        return re.split(',', text)",
            }
        ]
    )
    writer.assistant(
        _tool("toolu_2", "Bash", command="head -5 setup.cfg && pytest -q tests/test_parser.py"),
        stop="tool_use",
    )
    writer.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "is_error": True,
                "content": "Exit code 1\nFAILED tests/test_parser.py::test_quotes - "
                "AssertionError: assert ['a', '\"b'] == ['a', 'b']\n1 failed in 0.12s",
            }
        ]
    )
    writer.assistant(
        _tool(
            "toolu_3",
            "Edit",
            file_path="/project/src/parser.py",
            old_string="re.split(',', text)",
            new_string="next(csv.reader([text]))",
        ),
        stop="tool_use",
    )
    writer.user(
        [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "The file was updated."}]
    )
    writer.assistant({"type": "text", "text": "Fixed."}, stop="end_turn")
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / f"{writer.sid}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in writer.records), encoding="utf-8"
    )
    rt = retention(folder, {"none": [], "masking-1": [ObservationMasking(1)]}, reader="offline")
    by_kind = rt.facts.groupby("kind", observed=True)["text"].apply(list).to_dict()
    assert by_kind["instruction"] == [
        "Don't change the public API, and make sure the tests still pass."
    ]
    assert by_kind["path"] == ["/project/src/parser.py", "setup.cfg"]
    assert "Exit code 1" in by_kind["error"]
    assert any(e.startswith("FAILED tests/test_parser.py::test_quotes") for e in by_kind["error"])
    assert by_kind["identifier"] == ["class Parser:", "def parse(self, text):"]
    none = rt.totals.set_index(["strategy", "kind"]).loc[("none", "all")]
    assert none["kept_at_end_share"] == 1.0 and none["probe_accuracy"] == 1.0


def _codex_record(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": f"2026-01-01T00:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _codex_usage(second: int, tokens: int) -> dict[str, Any]:
    usage = {"input_tokens": tokens, "cached_input_tokens": 0, "output_tokens": 20}
    info = {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": 1e5}
    return _codex_record(second, "event_msg", {"type": "token_count", "info": info})


def test_codex_sessions(tmp_path: Path):
    """Extraction finds instructions, the files a Codex shell command read or a patch changed,
    and errors, in Codex's rollout format."""
    sid = "0199bbbb-0000-7000-8000-000000000002"
    build = 'fn main() {\n    compile("demo");\n}\n'
    records = [
        _codex_record(0, "session_meta", {"id": sid, "cwd": "/tmp/demo", "cli_version": "0.135"}),
        _codex_record(0, "turn_context", {"turn_id": "t1", "cwd": "/tmp/demo", "model": "gpt-5"}),
        _codex_record(
            1,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "Fix the build. Do not touch vendor/, and always run the "
                        "tests before you finish.",
                    }
                ],
            },
        ),
        _codex_record(
            2,
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "sed -n 1,40p src/build.rs"}),
                "call_id": "call_1",
            },
        ),
        _codex_usage(2, 1_200),
        _codex_record(
            3,
            "response_item",
            {"type": "function_call_output", "call_id": "call_1", "output": build},
        ),
        _codex_record(
            4,
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "cargo build"}),
                "call_id": "call_2",
            },
        ),
        _codex_usage(4, 1_400),
        _codex_record(
            5,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": "   Compiling demo v0.1.0\nerror[E0425]: cannot find function "
                "`compile` in this scope\nerror: could not compile `demo` (bin) due to 1 "
                "previous error\n",
            },
        ),
        _codex_record(
            6,
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Update File: src/build.rs\n@@\n-    compile"
                '("demo");\n+    build("demo");\n*** End Patch\n',
                "call_id": "call_3",
            },
        ),
        _codex_usage(6, 1_600),
        _codex_record(
            7,
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Success."},
        ),
        _codex_record(
            8,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Fixed: the build compiles."}],
            },
        ),
        _codex_usage(8, 1_700),
    ]
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / f"rollout-2026-01-01T00-00-00-{sid}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
    )
    rt = retention(folder, {"none": [], "masking-1": [ObservationMasking(1)]}, reader="offline")
    by_kind = rt.facts.groupby("kind", observed=True)["text"].apply(list).to_dict()
    assert by_kind["instruction"] == [
        "Do not touch vendor/, and always run the tests before you finish."
    ]
    assert by_kind["path"] == ["src/build.rs"]  # read by sed, then patched: one fact
    assert "error: could not compile `demo` (bin) due to 1 previous error" in by_kind["error"]
    assert by_kind["identifier"] == ["fn main() {"]
    totals = rt.totals.set_index(["strategy", "kind"])
    assert totals.loc[("none", "all"), "kept_at_end_share"] == 1.0
    assert totals.loc[("masking-1", "error"), "kept_at_end_share"] == 0.0


def test_bad_input_is_a_clear_error(planted: Path):
    with pytest.raises(ValueError, match="replicates"):
        retention(planted, {"none": []}, replicates=0)
    with pytest.raises(TypeError, match="str or Fact"):
        retention(planted, {"none": []}, facts=[42])
    with pytest.raises(ValueError, match="unknown fact kind"):
        Fact("x = 1", kind="number")
    with pytest.raises(ValueError, match="no answer"):
        Fact("x = 1", question="What is x?")


def test_the_wilson_interval():
    from evo_magic.analysis.intervals import wilson

    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    low, high = wilson(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0
    assert all(x != x for x in wilson(0, 0))  # NaN: nothing asked


def test_frontier_of_probe_accuracy_at_the_top_of_the_scale(planted: Path):
    import matplotlib

    matplotlib.use("Agg")
    rt = retention(
        planted,
        {"none": [], "again": [], "masking-1": [ObservationMasking(1)]},
        facts=PLANTED,
        reader="offline",
        model="claude-sonnet-4-5",
    )
    ax = rt.frontier(y="probe_accuracy")
    assert ax.get_ylabel() == "Probe accuracy"
    # Two settings are one: at one point, so one label names both (never "noneagain").
    assert [t.get_text() for t in ax.texts] == ["none, again", "masking-1"]
    ax.figure.draw_without_rendering()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert not boxes[0].overlaps(boxes[1])


def test_a_session_is_a_source_and_unseen_given_facts_are_said(tmp_path: Path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    with Session(workspace, model="offline", sandbox=sandbox_here()) as session:
        session.ask("List the files. Never delete anything.")
    with pytest.warns(UserWarning, match="1 given fact.*'NOT-IN-THE-SESSION'"):
        rt = retention(
            session, {"none": []}, facts=["Never delete anything.", "NOT-IN-THE-SESSION"]
        )
    kept = rt.kept.set_index("fact_id")
    assert kept["kept_at_end"].tolist() == [True, False]
    assert rt.facts["first_call"].isna().tolist() == [False, True]


def test_a_damaged_probe_cache_entry_is_asked_again(planted: Path, tmp_path: Path):
    asked: list[int] = []

    def read(request: ModelRequest) -> list[dict[str, Any]]:
        asked.append(1)
        return [{"type": "text", "text": "4096"}]

    options = {"facts": [PLANTED[2]], "reader": FunctionModel(read), "cache_dir": tmp_path}
    retention(planted, {"none": []}, **options)
    (entry,) = (tmp_path / "probes").iterdir()
    entry.write_text("{not json", encoding="utf-8")
    rt = retention(planted, {"none": []}, **options)
    assert len(asked) == 2 and rt.probes["correct"].all()
    retention(planted, {"none": []}, **options)
    assert len(asked) == 2  # rewritten, then read


def test_the_incremental_count_equals_a_scan_of_every_context(planted: Path):
    """What is followed call by call (only what changed) is what a scan of every fact against
    every whole context finds."""
    from evo_magic.strategies import ClearToolUses, LargeOutputs, MicroCompact

    strategies = {
        "none": [],
        "seed": None,
        "masking-2": [ObservationMasking(2)],
        "window": [SlidingWindow(keep=5)],
        "clear": [ClearToolUses(keep=1, trigger_tokens=500)],
        "mixed": [LargeOutputs(limit=1_000, preview_chars=200), MicroCompact(keep_recent=2)],
    }
    options = {"policy": CompactPolicy(context_limit=3_000), "summariser": OfflineModel()}
    rt = retention(planted, strategies, **options)
    facts = rt.facts.set_index("fact_id")
    scanned: dict[tuple[str, int], set[str]] = {}

    def scan(replayed: Any) -> None:
        texts = [block_text(b) for m in replayed.messages for b in m["content"]]
        held = set()
        for fact_id, row in facts.iterrows():
            if row["kind"] == "instruction":
                found = any(row["text"] in text for text in texts)
            else:
                found = any(normalise(row["text"]) in normalise(text) for text in texts)
            if found:
                held.add(fact_id)
        scanned[(replayed.strategy, replayed.call)] = held

    replay(planted, strategies, on_call=scan, **options)
    first = facts["first_call"]
    for row in rt.calls.itertuples():
        held = scanned[(row.strategy, row.call)]
        seen = {f for f in held if first[f] <= row.call}
        assert row.facts_kept == len(seen), (row.strategy, row.call)
        assert row.facts_seen == int((first <= row.call).sum())
    assert len(rt.calls) == len(scanned)
    for row in rt.kept.itertuples():
        calls = sorted(c for s, c in scanned if s == row.strategy)
        held = [
            c for c in calls if c >= row.first_call and row.fact_id in scanned[(row.strategy, c)]
        ]
        missing = [c for c in calls if c >= row.first_call and c not in held]
        if missing:
            assert row.lost_at_call == missing[0], (row.strategy, row.fact_id)
        else:
            assert pd.isna(row.lost_at_call), (row.strategy, row.fact_id)
        assert row.kept_at_end == (calls[-1] in held)
        assert row.kept_share == pytest.approx(
            len(held) / len([c for c in calls if c >= row.first_call])
        )
    # The settings differ, so the comparison is not between empty results.
    assert rt.totals[rt.totals["kind"] == "all"]["kept_share"].nunique() >= 4
    assert rt.kept["lost_at_call"].notna().sum() > 10 and rt.kept["recoverable"].notna().any()
