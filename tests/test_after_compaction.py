"""after_compaction: what agents repeat after a recorded compaction, against the same session
before it. Every measure is checked against a count made here by walking the file with `json`
(not with the code under test)."""

from __future__ import annotations

import json
import math
import posixpath
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import write_session
from support.compacting_session import compacting_session

from evo_magic import after_compaction, load_transcripts
from evo_magic.analysis.after_compaction.actions import effect

REAL = Path(__file__).parent / "fixtures" / "real"
COMPACTED = REAL / "claude-code-compaction"
UNCOMPACTED = REAL / "claude-code-2.1"


# ---- an independent count ---------------------------------------------------------------


@dataclass
class Use:
    """One tool call as the test reads it from a file."""

    call: int
    epoch: int
    name: str
    input: dict
    ok: bool
    chars: int


def _reads_writes(use: Use) -> tuple[set[str], set[str]]:
    """The files a call read and wrote, by the rules the docs state, written out plainly."""
    i = use.input
    if not use.ok:
        return set(), set()
    if use.name in ("read_file", "Read"):
        return {posixpath.normpath(i.get("path") or i["file_path"])}, set()
    if use.name in ("write_file", "edit_file", "Write", "Edit", "MultiEdit"):
        return set(), {posixpath.normpath(i.get("path") or i["file_path"])}
    if use.name in ("bash", "Bash"):
        command = i["command"]
        if command.startswith("cd ") and "&&" in command:
            command = command.split("&&", 1)[1]
        words = shlex.split(command.split("|")[0].split("&&")[0])
        reader = words and (words[0] in ("cat", "head", "tail") or words[:2] == ["sed", "-n"])
        if reader:
            args = [w for w in words[1:] if not w.startswith("-") and not w.isdigit()]
            if words[0] == "sed":
                args = args[1:]
            return {posixpath.normpath(a) for a in args}, set()
    return set(), set()


def count_by_hand(uses: list[Use], boundary_epochs: Iterable[int]) -> dict[int, dict[str, int]]:
    """For each compacted epoch: the counts over the calls of the next epoch, each compared
    with every call made before that epoch began; and the baseline of the compacted epoch."""
    out = {}
    for epoch in boundary_epochs:
        earlier = [u for u in uses if u.epoch <= epoch]
        later = [u for u in uses if u.epoch == epoch + 1]
        stretch = [u for u in uses if u.epoch == epoch]
        counts = {"reads": 0, "repeated_reads": 0, "repeated_commands": 0, "reacquired": 0}
        resume, calls_seen = None, []
        for n, use in enumerate(later):
            reads, writes = _reads_writes(use)
            if use.call not in calls_seen:
                calls_seen.append(use.call)
            repeated_read = bool(reads) and all(
                _read_unchanged(path, earlier, later[:n]) for path in reads
            )
            repeated_command = any((u.name, u.input) == (use.name, use.input) for u in earlier)
            counts["reads"] += bool(reads)
            counts["repeated_reads"] += repeated_read
            counts["repeated_commands"] += repeated_command
            if repeated_read or repeated_command:
                counts["reacquired"] += math.ceil(use.chars / 4)
            read_before = {p for u in earlier for p in _reads_writes(u)[0]}
            if resume is None and (writes or reads - read_before):
                resume = len(calls_seen)
        base = {"reads": 0, "repeated_reads": 0, "repeated_commands": 0}
        for n, use in enumerate(stretch):
            reads, _ = _reads_writes(use)
            before = [u for u in uses if u.epoch < epoch] + stretch[:n]
            base["reads"] += bool(reads)
            base["repeated_reads"] += bool(reads) and all(
                _read_unchanged(path, before, []) for path in reads
            )
            base["repeated_commands"] += any(
                (u.name, u.input) == (use.name, use.input) for u in before
            )
        out[epoch] = {**counts, "resume": resume, **{f"{k}_before": v for k, v in base.items()}}
    return out


def _read_unchanged(path: str, earlier: list[Use], between: list[Use]) -> bool:
    """`path` was read in `earlier` and not written after its last read there, nor in
    `between`."""
    last_read = max((k for k, u in enumerate(earlier) if path in _reads_writes(u)[0]), default=None)
    if last_read is None:
        return False
    later_writes = earlier[last_read + 1 :] + between
    return not any(path in _reads_writes(u)[1] for u in later_writes)


def evo_uses(session_file: Path) -> tuple[list[Use], list[int]]:
    """The tool calls of an evo_magic session.jsonl, and the epochs its compactions closed."""
    records = [json.loads(line) for line in session_file.read_text().splitlines()]
    results = {}
    for r in records:
        if r["kind"] == "tool_result":
            content = r["block"]["content"]
            body = content if isinstance(content, str) else "\n".join(p["text"] for p in content)
            results[r["block"]["tool_use_id"]] = (len(body), not r["block"].get("is_error"))
    uses, call, epoch, boundaries = [], 0, 0, []
    for r in records:
        if r["kind"] == "model_response":
            call = r["call"]
        if r["kind"] == "compaction" and r["success"]:
            boundaries.append(epoch)
            epoch += 1
        if r["kind"] == "message" and r["message"]["role"] == "assistant" and r["epoch"] == epoch:
            for block in r["message"]["content"]:
                if block["type"] == "tool_use":
                    chars, ok = results[block["id"]]
                    uses.append(Use(call + 1, epoch, block["name"], block["input"], ok, chars))
    return uses, boundaries


def claude_uses(path: Path) -> tuple[list[Use], list[int]]:
    """The main conversation's tool calls of a Claude Code file, and its compacted epochs."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a torn last line
    results = {}
    for r in records:
        if r.get("type") == "user" and isinstance(r["message"]["content"], list):
            for block in r["message"]["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = "\n".join(
                            p.get("text", "") for p in content if p["type"] == "text"
                        )
                    results[block["tool_use_id"]] = (len(content or ""), not block.get("is_error"))
    uses, calls, epoch, boundaries = [], {}, 0, []
    for r in records:
        if r.get("isSidechain"):
            continue
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            boundaries.append(epoch)
            epoch += 1
        if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>":
            calls.setdefault(r["message"]["id"], len(calls) + 1)
            for block in r["message"]["content"]:
                if block["type"] == "tool_use":
                    chars, ok = results.get(block["id"], (0, True))
                    call = calls[r["message"]["id"]]
                    uses.append(Use(call, epoch, block["name"], block["input"], ok, chars))
    return uses, boundaries


def assert_matches(row, counted: dict) -> None:
    assert row["reads_after"] == counted["reads"]
    assert row["repeated_reads"] == counted["repeated_reads"]
    assert row["repeated_commands"] == counted["repeated_commands"]
    assert row["reacquired_tokens"] == counted["reacquired"]
    assert row["calls_to_resume"] == counted["resume"]
    assert row["reads_before"] == counted["reads_before"]
    assert row["repeated_reads_before"] == counted["repeated_reads_before"]
    assert row["repeated_commands_before"] == counted["repeated_commands_before"]


# ---- an evo_magic session that compacts -------------------------------------------------


@pytest.fixture(scope="module")
def evo_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compacting_session(tmp_path_factory.mktemp("after"))


def test_an_evo_magic_session_matches_a_count_by_hand(evo_session: Path):
    a = after_compaction(evo_session)
    uses, boundaries = evo_uses(evo_session / "session.jsonl")
    counted = count_by_hand(uses, boundaries)
    rows = records(a.compactions.sort_values("compaction"))
    assert len(rows) == len(boundaries) == 2
    for row, epoch in zip(rows, boundaries, strict=True):
        assert_matches(row, counted[epoch])
    first = rows[0]
    # The script's design, so the count above is not vacuous:
    # b read again (unchanged); c was changed before the boundary, so `cat c.txt` is a repeated
    # command but no repeated read; a was written, so reading it again is neither.
    assert first["repeated_reads"] == 1 and first["repeated_commands"] == 3
    assert first["calls_to_resume"] == 3 and first["repeated_reads_before"] == 1
    assert rows[1]["repeated_reads"] == 1 and rows[1]["calls_to_resume"] is None
    assert first["calls_to_next_compaction"] == first["calls_after"] == 6
    assert rows[1]["calls_to_next_compaction"] is None
    # Every call after each compaction, until the next, has its row.
    after = a.calls[a.calls["compaction"] == 1]
    assert list(after["calls_since"]) == list(range(1, 7))
    assert after["repeated_reads"].sum() == first["repeated_reads"]


def records(frame) -> list[dict]:
    """A frame's rows as dicts, a missing value as None."""
    return [
        {k: (None if pd.isna(v) else v) for k, v in row.items()} for row in frame.to_dict("records")
    ]


# ---- real Claude Code sessions ----------------------------------------------------------


def test_a_real_claude_code_compaction_matches_a_count_by_hand():
    (path,) = COMPACTED.glob("*.jsonl")
    a = after_compaction(path)
    uses, boundaries = claude_uses(path)
    counted = count_by_hand(uses, boundaries)
    main = a.compactions[a.compactions["agent_id"].isna()]
    assert len(main) == len(boundaries) == 1
    (row,) = records(main)
    assert_matches(row, counted[boundaries[0]])
    assert row["trigger"] == "auto" and row["before_tokens"] > row["after_tokens"]
    assert row["repeated_reads"] > 0 and row["calls_to_resume"] > 1  # what this session shows


def test_sessions_without_a_compaction_give_no_rows_and_still_a_baseline():
    a = after_compaction(UNCOMPACTED)
    assert a.compactions.empty and a.calls.empty
    summary = a.summary()
    (row,) = summary.to_dict("records")
    assert row["trigger"] == row["strategy"] == "none" and row["compactions"] == 0
    t = load_transcripts(UNCOMPACTED)
    assert row["conversations"] == len(t.calls[["session_id", "agent_id"]].drop_duplicates())
    uses = [u for f in sorted(UNCOMPACTED.glob("*.jsonl")) for u in claude_uses(f)[0]]
    assert a.stretches["commands"].sum() == len(uses)
    assert row["repeated_command_share_before"] == pytest.approx(
        a.stretches["repeated_commands"].sum() / len(uses)
    )
    assert math.isnan(row["repeated_read_share"])


def test_the_summary_pools_rates_with_intervals(evo_session: Path):
    a = after_compaction(evo_session)
    summary = a.summary()
    (row,) = summary[summary["compactions"] > 0].to_dict("records")
    assert row["trigger"] == "user" and row["compactions"] == 2
    # Pooled over both compactions: 2 of the 4 reads after them (b, then a) were repeats.
    pooled = a.compactions["repeated_reads"].sum() / a.compactions["reads_after"].sum()
    assert row["repeated_read_share"] == pytest.approx(pooled) == 2 / 4
    assert row["repeated_read_share_low"] < 2 / 4 < row["repeated_read_share_high"]
    assert row["calls_to_resume"] == 3 and row["resumed_share"] == 0.5


def test_a_subagent_is_measured_as_its_own_conversation(tmp_path: Path):
    root = write_session(tmp_path, calls=70)
    a = after_compaction(root)
    t = load_transcripts(root)
    assert len(a.compactions) == len(t.compactions)
    agents = set(a.stretches["agent_id"].dropna())
    assert agents == set(t.calls["agent_id"].dropna())
    sub = a.stretches[a.stretches["agent_id"].notna()]
    assert sub["calls"].sum() == t.calls["agent_id"].notna().sum()


def test_the_plot_says_what_its_axes_are(evo_session: Path):
    import matplotlib

    matplotlib.use("Agg")
    figure = after_compaction(evo_session).plot()
    left, right = figure.axes
    assert "reads" in left.get_ylabel() and "resume" in right.get_title()
    assert right.get_xlabel().startswith("Calls after the compaction")


@pytest.mark.parametrize(
    ("tool", "given", "reads", "writes"),
    [
        ("bash", {"command": "cat src/a.py | grep x"}, ("src/a.py",), ()),
        (
            "Bash",
            {"command": "sed -n '1,20p' ./a/../b.txt && head -n 5 c.md 2>&1"},
            ("b.txt", "c.md"),
            (),
        ),
        ("Bash", {"command": "echo hi > out.txt; sed -i s/a/b/ f.py"}, (), ("out.txt", "f.py")),
        ("Bash", {"command": "sed 's/a/b/' f.py"}, (), ()),  # prints, reads nothing named
        ("exec_command", {"cmd": 'bash -lc "sed -n 1,200p lib/x.rs"'}, ("lib/x.rs",), ()),
        ("shell", {"command": ["bash", "-lc", "cat README.md"]}, ("README.md",), ()),
        ("apply_patch", {"input": "*** Begin Patch\n*** Update File: a/b.py\n@@"}, (), ("a/b.py",)),
        ("Bash", {"command": "cat 'unclosed"}, (), ()),
        ("Read", {"file_path": "/abs/x.py", "offset": 3}, ("/abs/x.py",), ()),
    ],
)
def test_which_files_a_call_reads_and_changes(tool, given, reads, writes):
    found = effect(tool, json.dumps(given))
    assert (found.reads, found.writes) == (reads, writes)
    assert effect(tool, json.dumps(given, indent=2)).key == found.key  # spacing is not a change


@pytest.mark.slow
def test_engines_give_the_same_frames(evo_session: Path, tmp_path: Path):
    root = write_session(tmp_path / "cc", calls=70)
    whole = after_compaction(root)
    apart = after_compaction(root, engine="local", workers=2, out=tmp_path / "out", progress=False)
    for name in ("compactions", "calls", "stretches"):
        pd.testing.assert_frame_equal(getattr(whole, name), getattr(apart, name))
    again = after_compaction(root, engine="local", workers=2, out=tmp_path / "out", progress=False)
    pd.testing.assert_frame_equal(again.compactions, whole.compactions)


def test_a_lake_gives_the_frames_its_folder_gives(tmp_path: Path):
    root = write_session(tmp_path / "cc", calls=70)
    lake = load_transcripts(root, lake=tmp_path / "lake")
    whole, from_lake = after_compaction(root), after_compaction(lake)
    assert len(whole.compactions) and len(whole.calls)
    for name in ("compactions", "calls", "stretches"):
        pd.testing.assert_frame_equal(getattr(from_lake, name), getattr(whole, name))
