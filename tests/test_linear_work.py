"""Linear-time properties guarded by counting work, not seconds (speed lives in benchmarks/):
what an operation over n sessions touches must grow with n, not with n squared; and what one
model call touches of the history (the every-call strategies, the server strategies' part of
the request, the request itself) is the same at 200 messages and at 2,000."""

from __future__ import annotations

import gc
import json
import tracemalloc
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.fake_api import FakeAnthropic

from evo_magic.analysis import load_transcripts, loader
from evo_magic.analysis.errors import TranscriptError
from evo_magic.compact.base import Context
from evo_magic.compact.compactor import CompactionServices, Compactor
from evo_magic.compact.policy import CompactPolicy
from evo_magic.history import History
from evo_magic.measure import ContextSize
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.composition import HistoryComposition, composition
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import CallPoint, Compaction, MeterLog
from evo_magic.meter.state import StateCache, state_of
from evo_magic.meter.tally import Tally
from evo_magic.meter.text import meter_text
from evo_magic.models.anthropic import AnthropicModel, request_params
from evo_magic.models.base import ModelRequest, system_note
from evo_magic.prompt_cache import CacheSettings, place_breakpoints
from evo_magic.strategies import MicroCompact
from evo_magic.strategies.registry import BUILTIN, make_strategy

REAL = Path(__file__).parent / "fixtures" / "real" / "claude-code-2.1"


def _copies(folder: Path, count: int) -> list[str]:
    """`count` copies of the real Claude Code sessions, each under new session ids."""
    ids = []
    for original in sorted(REAL.glob("*.jsonl")):
        lines = original.read_text().splitlines()
        old = json.loads(lines[0]).get("sessionId") or next(
            json.loads(line)["sessionId"] for line in lines if '"sessionId"' in line
        )
        for _ in range(count):
            new = str(uuid.uuid4())
            (folder / f"{new}.jsonl").write_text("\n".join(lines).replace(old, new) + "\n")
            ids.append(new)
    return ids


def test_cutting_every_session_out_scans_each_frame_once(tmp_path: Path) -> None:
    ids = _copies(tmp_path, 12)
    t = load_transcripts(tmp_path)
    assert sorted(t.session_ids()) == sorted(ids)
    frames = {"blocks": t.blocks, "calls": t.calls, "compactions": t.compactions, "parts": t.parts}
    for sid in t.session_ids():
        one = t.session(sid)
        for name, frame in frames.items():
            if "session_id" not in frame.columns:
                continue
            # The oracle: a plain mask over the whole frame, in the order the rows were read.
            expected = frame[frame["session_id"].astype(object) == sid].reset_index(drop=True)
            pd.testing.assert_frame_equal(getattr(one, name), expected)
        assert one.session_ids() == [sid]
        assert [p.name for p in one.files] == [f"{sid}.jsonl"]
    # Each row of each frame (and of the identities table) looked at once for all 24 sessions,
    # where masking per session looked at every row 24 times.
    identities = t._identities.num_rows if t._identities is not None else 0
    total = sum(len(f) for f in frames.values() if "session_id" in f.columns) + identities
    assert t._rows.rows_scanned == total


def test_a_frame_replaced_after_a_cut_is_indexed_again(tmp_path: Path) -> None:
    _copies(tmp_path, 2)
    t = load_transcripts(tmp_path)
    first = t.session_ids()[0]
    assert len(t.session(first).calls)
    t.calls = t.calls[t.calls["session_id"].astype(object) != first].reset_index(drop=True)
    assert len(t.session(first).calls) == 0  # the old index is not reused for the new frame


def _load_counting(folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Load `folder`, counting the lines parsed in Python and the SQL statements run."""
    counts = {"parsed": 0, "statements": 0}
    parse, fetch = loader._parse, loader.Engine.fetch

    def counted_parse(line: bytes) -> Any:
        counts["parsed"] += 1
        return parse(line)

    def counted_fetch(self: loader.Engine, sql: str, params: Any = None) -> Any:
        counts["statements"] += 1
        return fetch(self, sql, params)

    monkeypatch.setattr(loader, "_parse", counted_parse)
    monkeypatch.setattr(loader.Engine, "fetch", counted_fetch)
    t = load_transcripts(folder)
    assert len(t.calls) and len(t.blocks)
    monkeypatch.undo()
    return counts


def test_a_load_parses_a_few_lines_per_file_in_python_and_a_fixed_number_of_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = {}
    for copies in (2, 8):
        folder = tmp_path / f"x{copies}"
        folder.mkdir()
        _copies(folder, copies)
        counted[copies] = _load_counting(folder, monkeypatch)
    files = len(list((tmp_path / "x2").glob("*.jsonl")))
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "x2").glob("*.jsonl"))
    # Python parses only what tells a file's format and session (its first records, once
    # each for grouping and for the format), not its lines: DuckDB reads those.
    assert counted[2]["parsed"] <= 16 * files < lines
    assert counted[8]["parsed"] == 4 * counted[2]["parsed"]
    # Four times the sessions in one batch: the same statements, each over more files.
    assert counted[8]["statements"] == counted[2]["statements"]


@pytest.mark.parametrize("fixture", ["claude-code-2.1", "codex-0.104", "openhands-events"])
def test_statements_run_at_once_give_the_frames_a_relation_gives(
    fixture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small batch's statements run at once (bound once, their Arrow copied once more), a
    # large one's as relations: which way a statement ran must not show in any frame.
    folder = REAL.parent / fixture
    at_once = load_transcripts(folder)
    monkeypatch.setattr(loader, "AT_ONCE_BYTES", 0)
    related = load_transcripts(folder)
    for name in ("blocks", "parts", "calls", "compactions", "events"):
        pd.testing.assert_frame_equal(getattr(at_once, name), getattr(related, name))


def _collections_during_load(folder: Path) -> dict[int, int]:
    """The cycle collections, by generation, that a load of `folder` ran."""
    counts = {0: 0, 1: 0, 2: 0}

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            counts[info["generation"]] += 1

    gc.collect()
    gc.callbacks.append(count)
    try:
        t = load_transcripts(folder)
    finally:
        gc.callbacks.remove(count)
    assert len(t.calls) and len(t.blocks)
    return counts


def test_a_load_runs_no_more_cycle_collections_as_it_grows(tmp_path: Path) -> None:
    # The collector runs every few hundred objects made, and each of its older passes looks
    # again at every object a load keeps: run that way, a load's collections grow with its
    # records (18 at 12 copies, 44 at 40) and cost a fifth of its time. A load frees the
    # cycles of each batch once instead (generation 1: only what the batch made).
    counts = {}
    for copies in (12, 40):
        folder = tmp_path / f"x{copies}"
        folder.mkdir()
        _copies(folder, copies)
        counts[copies] = _collections_during_load(folder)
    assert counts[40][2] == counts[12][2] == 0
    assert counts[40][0] <= counts[12][0] + 2
    assert gc.isenabled()


def test_a_load_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    _copies(tmp_path, 1)
    gc.disable()
    try:
        load_transcripts(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(TranscriptError):
        load_transcripts(tmp_path / "nothing-here")
    assert gc.isenabled()


# -- the per-call path ---------------------------------------------------------------------

TOUCHED: set[int] = set()


class Counted(dict):
    """A message that notes when it is read: any lookup, iteration or encoding of it."""

    def _seen(self) -> None:
        TOUCHED.add(id(self))

    def get(self, *args: Any) -> Any:
        self._seen()
        return super().get(*args)

    def __getitem__(self, key: Any) -> Any:
        self._seen()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._seen()
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self._seen()
        return super().__iter__()

    def items(self) -> Any:
        self._seen()
        return super().items()

    def keys(self) -> Any:
        self._seen()
        return super().keys()

    def values(self) -> Any:
        self._seen()
        return super().values()


def ask(n: int) -> Counted:
    return Counted(role="user", content=[{"type": "text", "text": f"request {n}: go on"}])


def batch(n: int) -> tuple[Counted, list[dict[str, Any]]]:
    """One model step: a turn that calls a tool (with some thinking), and its result."""
    use = {"type": "tool_use", "id": f"toolu_{n:06d}", "name": "read_file",
           "input": {"path": f"src/m{n % 7}.py"}}  # fmt: skip
    turn = Counted(role="assistant", content=[
        {"type": "thinking", "thinking": f"step {n}", "signature": "sig"},
        {"type": "text", "text": f"Reading file {n % 7}."}, use,
    ])  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": f"line {n}\n" * 60}
    return turn, [result]


def grown(history: History, compactor: Compactor, size: int) -> int:
    """Grow `history` to about `size` messages as a loop does: a step, then the strategies;
    every tenth step the model answers and the user asks again (a new turn)."""
    n = 0
    history.append(ask(n))
    while len(history) < size:
        n += 1
        step(history, compactor, n)
        if n % 10 == 0:
            history.append(Counted(role="assistant", content=[{"type": "text", "text": "Done."}]))
            history.append(ask(n))
    return n


def step(history: History, compactor: Compactor, n: int) -> None:
    turn, results = batch(n)
    history.append(turn)
    for block in results:
        history.add_tool_result(block)
    # The results message the history built is a plain dict: count it too.
    history.rewrite({len(history) - 1: Counted(history.view()[-1])})
    compactor.before_call()


def compactor_for(name: str, history: History) -> Compactor:
    services = CompactionServices(
        emit=lambda event: None,
        summarise=lambda messages, focus: None,  # type: ignore[arg-type,return-value]
        save_output=lambda tool_use_id, text: "saved.txt",
    )
    policy = CompactPolicy(context_limit=10**12)  # never over the limit: per-call work only
    return Compactor(history, services, policy=policy, strategies=[make_strategy(name)])


def touched_per_call(name: str, size: int, replaced: bool = False) -> int:
    """Messages of the history one call touches once the history has `size` messages (after
    a server compaction block was seen and a client compaction replaced it, when asked)."""
    history = History(lambda event: None)
    compactor = compactor_for(name, history)
    n = grown(history, compactor, size)
    if replaced:
        compactor.server.summarised()  # a server block came and went: its beta is remembered
    TOUCHED.clear()
    step(history, compactor, n + 1)
    compactor.server.params("claude-opus-4-6")
    history.snapshot()
    return len(TOUCHED)


SLACK = 30
"""Touched messages that may differ with where the call falls in a turn (a turn is 22
messages here); a scan of the history would touch 1,800 more at 2,000 messages."""
EVERY_CALL = [name for name in BUILTIN if make_strategy(name).when == "every_call"]


@pytest.mark.parametrize("name", EVERY_CALL)
def test_every_call_strategy_touches_the_same_at_any_length(name: str) -> None:
    small, large = touched_per_call(name, 200), touched_per_call(name, 2_000)
    assert large <= small + SLACK, (name, small, large)


@pytest.mark.parametrize("name", ["server-compact", "server-clear-tool-uses"])
def test_server_strategies_after_a_replacement_do_not_scan_the_history(name: str) -> None:
    small = touched_per_call(name, 200, replaced=True)
    large = touched_per_call(name, 2_000, replaced=True)
    assert large <= small + SLACK, (name, small, large)


def test_a_request_is_built_without_copying_the_history() -> None:
    """Building a request allocates the same at 200 and at 20,000 messages."""

    def allocated(size: int) -> int:
        history = History(lambda event: None)
        for n in range(size):
            history.append({"role": "user" if n % 2 else "assistant", "content": "x"})
        tracemalloc.start()
        try:
            history.snapshot()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert allocated(20_000) <= allocated(200) + 1_024


def _snapshot_of(size: int) -> Any:
    history = History(lambda event: None)
    history.append(ask(0))
    n = 0
    while len(history) < size:
        n += 1
        turn, results = batch(n)
        history.append(turn)
        history.add_tool_result(results[0])
    return history, history.snapshot()


NOTED = "mid-conversation-system-clear-at-2026-08-21"
PATH = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": PATH}]


def test_the_adapter_marks_a_request_without_copying_the_history() -> None:
    """The Anthropic adapter's request (breakpoints placed, a turn note after them) allocates
    the same at 200 and at 20,000 messages: the marked messages are swapped in, not copied in."""

    def allocated(size: int) -> int:
        _, sent = _snapshot_of(size)
        request = ModelRequest(
            messages=sent, max_tokens=64, system="Be brief.", cache=CacheSettings(),
            edited_from=size // 2, turn_note="Half the window is used.", betas=(NOTED,),
        )  # fmt: skip
        tracemalloc.start()
        try:
            request_params(request, "claude-opus-4-6")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert allocated(20_000) <= allocated(200) + 1_024


@pytest.mark.parametrize("cache", [CacheSettings(), CacheSettings(enabled=False)])
def test_the_adapter_sends_what_a_copied_list_sends(cache: CacheSettings) -> None:
    """The request on the wire is the one a plain list with the breakpoints placed sends, byte
    for byte: after a message of the snapshot was overwritten in the history, with a turn
    note after the newest message."""
    history, sent = _snapshot_of(40)
    history.rewrite({5: {"role": "assistant", "content": [{"type": "text", "text": "later"}]}})
    history.append({"role": "assistant", "content": [{"type": "text", "text": "not sent"}]})
    note = "A third of the window is used."
    request = ModelRequest(
        messages=sent, max_tokens=64, system="Be brief.", tools=TOOLS, cache=cache,
        edited_from=9, turn_note=note, betas=(NOTED,),
    )  # fmt: skip
    plain = [json.loads(json.dumps(message)) for message in sent]  # the messages as sent
    assert plain[5]["content"] != [{"type": "text", "text": "later"}] and len(plain) == 41
    expected = place_breakpoints(
        plain,
        system="Be brief.",
        tools=TOOLS,
        settings=cache,
        model="claude-opus-4-6",
        edited_from=9,
    ).params
    with FakeAnthropic() as fake:
        AnthropicModel("claude-opus-4-6", client=fake.client()).respond(request)
        with fake.client().beta.messages.stream(
            model="claude-opus-4-6", max_tokens=64, betas=[NOTED],
            **{**expected, "messages": [*expected["messages"], system_note(note)]},
        ) as stream:  # fmt: skip
            stream.get_final_message()
        fake.assert_no_rejections()
        ours, copied = fake.requests
    assert json.dumps(ours) == json.dumps(copied)
    assert ours["messages"][-1] == system_note(note) and len(ours["messages"]) == 42
    assert [dict(m) for m in sent] == plain  # nothing sent was marked in place


def test_a_request_reads_as_it_was_sent_after_the_history_changed() -> None:
    history = History(lambda event: None)
    history.append(ask(0))
    turn, results = batch(1)
    history.append(turn)
    sent = history.snapshot()
    before = [dict(m) for m in sent]
    history.add_tool_result(results[0])  # the new results message: not part of what was sent
    history.rewrite({0: {"role": "user", "content": [{"type": "text", "text": "edited"}]}})
    history.rewrite({0: {"role": "user", "content": [{"type": "text", "text": "again"}]}})
    assert len(sent) == 2 and [dict(m) for m in sent] == before
    assert list(sent[-1:]) == [before[-1]] and dict(list(reversed(sent))[1]) == before[0]
    history.replace([{"role": "user", "content": "summary"}])
    assert [dict(m) for m in sent] == before
    assert list(history.snapshot()) == [{"role": "user", "content": "summary"}]


def test_context_for_messages_measures_nothing_it_is_not_asked_for() -> None:
    messages = [ask(0)]
    for n in range(1, 1_000):
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
    TOUCHED.clear()
    ctx = Context.for_messages(messages)
    assert len(TOUCHED) == 0  # neither measured nor scanned for tool names up front
    assert ctx.tool_name({"tool_use_id": "toolu_000007"}) == "read_file"
    assert ctx.size.messages == len(messages)  # measured once, when read
    assert ctx.size.chars == len(json.dumps(messages, separators=(",", ":")))
    TOUCHED.clear()
    assert ctx.size.messages == len(messages) and len(TOUCHED) == 0  # kept, not measured again
    with pytest.raises(AttributeError, match="no attribute 'sizes'"):
        ctx.sizes  # noqa: B018  (any other missing attribute is still an error)
    given = Context.for_messages(messages)
    given.size = ContextSize(1, 2, 3)
    assert given.size == ContextSize(1, 2, 3)


def outside_a_session(size: int, memo: dict[str, Any] | None) -> tuple[list[Any], int]:
    """A list grown to `size` messages with MicroCompact run before every call through
    `Context.for_messages` (its memo kept between calls, when given), as a script or another
    framework runs a strategy; the final list, and the messages the last call touched."""
    strategy = MicroCompact(cache_aware=False)
    messages: list[Any] = [ask(0)]
    n = 0
    while len(messages) < size:
        n += 1
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
        TOUCHED.clear()
        ctx = Context.for_messages(messages, memo=memo if memo is not None else {})
        result = strategy.compact(messages, ctx)
        if result is not None:
            messages = [m if isinstance(m, Counted) else Counted(m) for m in result]
    return messages, len(TOUCHED)


def test_a_strategy_outside_a_session_touches_the_same_at_any_length() -> None:
    """MicroCompact run per call through `Context.for_messages` with its memo kept indexes only
    the new messages (each fresh context scanned every tool result and tool name per call)."""
    small = outside_a_session(200, {})[1]
    kept, large = outside_a_session(2_000, {})
    assert large <= small + SLACK, (small, large)
    fresh, scanned = outside_a_session(2_000, None)  # a new memo per call: the scan
    assert scanned > 1_000
    assert json.dumps(kept) == json.dumps(fresh)  # the same history either way
    placeholders = [m for m in kept if "compacted" in json.dumps(m)]
    assert len(placeholders) > 900


def test_a_kept_index_follows_a_list_replaced_by_another() -> None:
    memo: dict[str, Any] = {}
    messages = [ask(0)]
    for n in range(1, 40):
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
    before = Context.for_messages(messages, memo=memo).tool_results()
    assert [ref.tool_use_id for ref in before] == [f"toolu_{n:06d}" for n in range(1, 40)]
    window = [ask(99), *messages[-6:]]  # the history replaced by a shorter one
    after = Context.for_messages(window, memo=memo)
    assert [(r.index, r.tool_use_id) for r in after.tool_results()] == [
        (2, "toolu_000037"), (4, "toolu_000038"), (6, "toolu_000039"),
    ]  # fmt: skip
    assert after.tool_name({"tool_use_id": "toolu_000038"}) == "read_file"


def composition_touched(size: int) -> int:
    """Messages one refresh of the meter's composition touches after a call, at `size`."""
    history = History(lambda event: None)
    compactor = compactor_for("micro", history)
    n = grown(history, compactor, size)
    composer = HistoryComposition(history)
    composer.shares(100, 1_000)
    TOUCHED.clear()
    step(history, compactor, n + 1)  # appends, and micro-compaction rewrites an old result
    shares = composer.shares(100, 1_000)
    touched = len(TOUCHED)
    assert shares == composition(list(history.view()), 100, 1_000)  # the whole, measured anew
    history.replace([ask(1), *batch(2)[:1]])
    assert composer.shares(0, 50) == composition(list(history.view()), 0, 50)
    return touched


def test_the_meter_composition_measures_only_what_changed() -> None:
    small, large = composition_touched(200), composition_touched(2_000)
    assert large <= small + SLACK, (small, large)


# -- the live meter ------------------------------------------------------------------------


def meter_step(log: MeterLog, n: int) -> None:
    """Call `n` of a long session as the log folds it: a call, and every other call a
    micro-compaction before it; a full compaction every 500 calls."""
    size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)
    log.calls.append(CallPoint(n, n // 10 + 1, size, size, None, 0.001, ("tool results",)))
    if n % 2:
        log.compactions.append(
            Compaction(0, True, "micro", "micro", "every_call", None, size, size, True, n,
                       n // 10 + 1, cleared=("read_file",))
        )  # fmt: skip
    if n % 500 == 0:
        after = ContextSize(4, 2_000, 500)
        number = n // 500
        log.compactions.append(
            Compaction(number, False, "summarise", "full", "auto", None, size, after, True, n,
                       n // 10 + 1, summary="The work so far.")
        )  # fmt: skip


def meter_data(log: MeterLog, scope: Any, tally: Tally | None = None) -> MeterData:
    now = ContextSize(9, 10**6, 10**5)
    return MeterData.of(log, scope, "s", 10**9, None, now, [], 0.25, tally)


def built_per_refresh(calls: int, cell_from: int | None = None) -> int:
    """Sums, columns, marks and states a live meter builds at one refresh after `calls` calls
    (the refreshes before it kept theirs), checking every refresh against a rendering anew."""
    log = MeterLog()
    tally, states, chart = Tally(), StateCache(), ChartCache()
    scope = log.whole()

    def refreshed() -> None:
        live, anew = meter_data(log, scope, tally), meter_data(log, scope)
        assert meter_html(live, chart) == meter_html(anew)
        assert meter_text(live) == meter_text(anew)
        assert state_of(live, states) == state_of(anew)

    for n in range(1, calls + 1):
        meter_step(log, n)
        if n == cell_from:
            scope = log.mark("cell", ContextSize(1, 2, 3))
        if n % 97 == 0 or n == calls:  # refreshed now and then, as the throttle does
            refreshed()
    before = chart.built + states.built + tally.calls + tally.rows
    meter_step(log, calls + 1)
    refreshed()
    return chart.built + states.built + tally.calls + tally.rows - before


def test_a_live_meter_refresh_builds_only_what_is_new() -> None:
    """A refresh of the live meter builds the new call's and compaction's states and marks and
    the newest column: the same at 200 and at 5,000 calls (it rebuilt every state, column and
    mark: some 8,000 at 5,000 calls)."""
    small, large = built_per_refresh(200), built_per_refresh(5_000)
    # A call and its micro-compaction: summed, a state each; the newest column; their mark.
    assert small == large == 6, (small, large)
    assert built_per_refresh(5_000, cell_from=4_100) == 6


def test_a_fresh_meter_builds_everything() -> None:
    log = MeterLog()
    for n in range(1, 301):
        meter_step(log, n)
    states, chart = StateCache(), ChartCache()
    data = meter_data(log, log.whole())
    meter_html(data, chart)
    state_of(data, states)
    # 300 calls in 150 columns of 2; their 150 micro-compactions in 150 marks; 450 states.
    assert (chart.built, states.built) == (150 + 150, 300 + 150)


def test_replay_measures_each_thinking_block_once_not_the_history_per_call(monkeypatch):
    # Replay's estimate needs the thinking characters of the whole prompt at every call; they
    # are kept as the history grows, is rewritten in place and is replaced.
    from evo_magic.analysis.replay import thinking as module
    from evo_magic.messages import thinking_chars

    measured: list[int] = []
    real = module.thinking_chars
    monkeypatch.setattr(module, "thinking_chars", lambda ms: measured.append(len(ms)) or real(ms))
    history = History(lambda event: None)
    follower = module.ThinkingChars()

    def turn(n: int) -> None:
        thought = {"type": "thinking", "thinking": "why " * n, "signature": "s"}
        history.append({"role": "user", "content": f"ask {n}"})
        history.append({"role": "assistant", "content": [thought, {"type": "text", "text": "ok"}]})

    per_call = []
    for n in range(400):
        turn(n)
        before = sum(measured)
        assert follower.of(history) == thinking_chars(history.view())
        per_call.append(sum(measured) - before)
    assert max(per_call) == 2  # the two new messages, at 2 or at 800 messages
    # Rewritten in place: the thinking of message 1 cleared; only that message is measured.
    before = sum(measured)
    history.rewrite({1: {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}})
    assert follower.of(history) == thinking_chars(history.view())
    assert sum(measured) - before == 1
    # Replaced (a full compaction): measured afresh, once.
    history.replace([{"role": "user", "content": "summary"}])
    assert follower.of(history) == 0 and follower.of(history) == 0


def live_and_anew(log: MeterLog, scope: Any, tally: Tally, chart: ChartCache) -> None:
    """The live meter's HTML, with what its earlier refreshes drew kept, is the fresh one."""
    assert meter_html(meter_data(log, scope, tally), chart) == meter_html(meter_data(log, scope))


def test_a_live_meter_draws_at_every_refresh_what_a_fresh_one_draws() -> None:
    """Refreshed at every call through a full compaction (call 1,000), a regrouping of the
    chart's columns (call 1,121: 8 calls a column instead of 7), the log's newest compactions
    rewritten, and a cell's scope starting: every page is the fresh rendering, byte for byte."""
    log = MeterLog()
    tally, chart = Tally(), ChartCache()
    scope = log.whole()
    for n in range(1, 1_141):
        meter_step(log, n)
        if 990 <= n <= 1_010 or n >= 1_110:
            live_and_anew(log, scope, tally, chart)
    assert chart.drawn.strings and chart.listed.strings  # what was kept was used
    # The newest compactions written again (fewer, other tools): nothing kept is shown stale.
    rewritten = replace(log.compactions[-1], cleared=("grep", "bash"), after=ContextSize(1, 7, 2))
    del log.compactions[-3:]
    live_and_anew(log, scope, Tally(), chart)
    log.compactions.append(rewritten)
    live_and_anew(log, scope, Tally(), chart)
    scope = log.mark("cell", ContextSize(1, 2, 3))
    for n in range(1_141, 1_160):
        meter_step(log, n)
        live_and_anew(log, scope, tally, chart)


def drawn_per_refresh(calls: int) -> int:
    """HTML strings (columns, marks, listed compactions) a live meter draws at the refresh
    after one more call, the refresh after `calls` calls having drawn everything."""
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_step(log, n)
    tally, chart = Tally(), ChartCache()
    live_and_anew(log, log.whole(), tally, chart)
    before = chart.drawn.made + chart.listed.made
    meter_step(log, calls + 1)  # in the newest column (a new one moves the axis: all drawn)
    live_and_anew(log, log.whole(), tally, chart)
    return chart.drawn.made + chart.listed.made - before


def test_a_live_meter_refresh_draws_only_what_changed() -> None:
    """The newest column, its micro-compaction's mark and its ask's row: the same 3 strings
    at 1,000 and at 10,000 calls (a refresh drew its columns, as many marks, the 20 listed
    asks and every full compaction's mark and row again: 312 and 378 strings). The call
    added is inside the newest column, neither its first nor its last (those move the axis's
    end: all are drawn again)."""
    assert drawn_per_refresh(1_002) == drawn_per_refresh(10_000) == 3


def _encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of every JSON encoding evo_magic makes (the encoder behind `to_json`)."""
    from evo_magic import measure

    count = [0]
    encode = measure._ENCODER.encode

    def counted(value: Any) -> str:
        count[0] += 1
        return encode(value)

    monkeypatch.setattr(measure._ENCODER, "encode", counted)
    return count


def test_replay_encodes_each_recorded_block_once_for_every_strategy_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each run of a conversation (the calibration pass, then each setting) encoded every block
    # it was given, in its history and in its prefix chain; the recording's blocks are now
    # encoded once for all of them, so a setting that changes nothing encodes nothing.
    from support.claude_code_session import write_session

    from evo_magic import replay

    t = load_transcripts(write_session(tmp_path, calls=80))
    count = _encodings(monkeypatch)
    one = replay(t, {"none": []}, model="claude-sonnet-4-5")
    alone, count[0] = count[0], 0
    three = replay(t, {"a": [], "b": [], "c": []}, model="claude-sonnet-4-5")
    assert count[0] == alone
    expected = one.calls.drop(columns="strategy")
    for label in "abc":
        rows = three.calls[three.calls["strategy"] == label].drop(columns="strategy")
        pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected)


def _turns(count: int, tag: str) -> list[dict[str, Any]]:
    return [
        {"role": role, "content": [{"type": "text", "text": f"{tag} {role} {n}"}]}
        for n in range(count // 2)
        for role in ("user", "assistant")
    ]


def test_a_replayed_call_encodes_and_compares_only_what_changed_at_any_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evo_magic.analysis.replay.pricing import Pricing
    from evo_magic.encoded import EncodedBlocks
    from evo_magic.prompt_cache import cache_request, start_key

    count = _encodings(monkeypatch)
    work = {}
    for length in (200, 4_000):
        recorded = _turns(length, "recorded")
        encoded = EncodedBlocks.of(block for message in recorded for block in message["content"])
        history = History(lambda event: None, encoded=encoded)
        pricing = Pricing("claude-sonnet-4-5", None, None, None, encoded)
        for message in recorded[:-2]:
            history.append(message)
        pricing.follow(history)
        count[0], compared = 0, pricing.chain.compared
        # A call: two recorded messages more, then a strategy's block rewritten in place (a
        # recent one: every key after an edit changes, so what follows it is hashed again).
        history.append(recorded[-2])
        history.append(recorded[-1])
        pricing.follow(history)
        edit = {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
        history.rewrite({length - 5: edit})
        chain = pricing.follow(history)
        work[length] = (count[0], chain.compared - compared)
        # The keys are the ones a whole request's walk derives (the last block marked).
        view = [*history.view()]
        last = {**view[-1], "content": [{**view[-1]["content"][0], "cache_control": {}}]}
        request = cache_request(
            {"messages": [*view[:-1], last]}, time=0.0, model="claude-sonnet-4-5"
        )
        assert chain.key() == request.breakpoints[-1].key
        assert chain.start == start_key("claude-sonnet-4-5")
    # The new block, measured by the history and hashed by the chain: the recorded ones are
    # encoded already; the identity scan looks at what changed, not at the whole history.
    assert work[200] == work[4_000]
    assert work[200][0] == 2


def test_replaying_many_sessions_finds_each_by_the_index_not_by_masking_every_frame(
    tmp_path: Path,
) -> None:
    # Replay (and retention and rewind, through `recordings`) masked every frame for each
    # conversation: quadratic in the number of sessions. Each frame is now looked at once for
    # all of them (the index's scan, or one conversion into rows: see test_replay_work.py).
    from evo_magic import replay

    ids = _copies(tmp_path, 4)
    t = load_transcripts(tmp_path)
    done = replay(t, {"none": []}, model="claude-sonnet-4-5")
    frames = [t.blocks, t.calls, t.compactions, t.parts]
    identities = t._identities.num_rows if t._identities is not None else 0
    total = sum(len(f) for f in frames if "session_id" in f.columns) + identities
    assert t._rows.rows_scanned <= total
    # The oracle: each session's file replayed alone, loaded on its own.
    assert sorted(done.calls["session_id"].unique()) == sorted(ids)
    for sid in ids[:: len(ids) // 2]:
        alone = replay(load_transcripts(tmp_path / f"{sid}.jsonl"), {"none": []},
                       model="claude-sonnet-4-5").calls  # fmt: skip
        mine = done.calls[done.calls["session_id"] == sid].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone)


def test_a_session_without_identity_rows_is_cut_out_like_the_others(tmp_path: Path) -> None:
    # Inspect logs beside each other: some sessions have no row in the identities table; the
    # empty list of positions taken from it had no type, and the cut raised.
    import shutil
    import warnings

    inspect = Path(__file__).parent / "fixtures" / "real"
    logs = sorted((inspect / "inspect-eval").glob("*.eval"))
    logs += sorted((inspect / "inspect-json").glob("*.json"))
    for path in logs:
        shutil.copy(path, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # models without a price
        t = load_transcripts(tmp_path)
    assert len(t.session_ids()) > 1
    for sid in t.session_ids():
        one = t.session(sid)
        expected = t.calls[t.calls["session_id"].astype(object) == sid].reset_index(drop=True)
        pd.testing.assert_frame_equal(one.calls, expected)
