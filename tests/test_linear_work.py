"""Linear-time properties of loading and replay guarded by counting work, not seconds (speed
lives in benchmarks/): what an operation over n sessions touches must grow with n, not with n
squared. The per-call path's are in test_linear_work_percall.py, the meter's in
test_linear_work_meter.py."""

from __future__ import annotations

import gc
import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evo_magic.analysis import load_transcripts, loader
from evo_magic.analysis.errors import TranscriptError
from evo_magic.history import History

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


def test_a_session_cut_from_interleaved_rows_or_one_run_is_its_rows_and_its_own(
    tmp_path: Path,
) -> None:
    # A load keeps each session's rows in one run, which is cut as a slice; rows of sessions
    # interleaved (frames a user sorted, say) are taken by position. Both give the session's
    # rows in order, and a cut the user changes leaves the loaded frames as they were.
    _copies(tmp_path, 2)
    t = load_transcripts(tmp_path)
    order = np.argsort(np.arange(len(t.blocks)) % 3, kind="stable")  # sessions interleaved
    mixed = replace(t, blocks=t.blocks.iloc[order].reset_index(drop=True))
    for source in (t, mixed):
        for sid in source.session_ids():
            frame = source.blocks
            expected = frame[frame["session_id"].astype(object) == sid].reset_index(drop=True)
            cut = source.session(sid).blocks
            pd.testing.assert_frame_equal(cut, expected)
            before = frame.copy()
            cut.loc[0, "text"] = "changed after the cut"
            cut.loc[0, "chars"] = -1
            pd.testing.assert_frame_equal(source.blocks, before)


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
