"""A transcript is data: names, nesting, numbers and clocks in it are checked, never trusted.

Built from real files (tests/fixtures/real/, see its README), changed in one place each.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from evo_magic import load_transcripts
from evo_magic.analysis import TranscriptWarning
from evo_magic.analysis.replay import replay

REAL = Path(__file__).parent / "fixtures" / "real"
CLAUDE = REAL / "claude-code-2.1" / "47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c.jsonl"
CLAUDE_PARALLEL = REAL / "claude-code-2.1" / "88f04c6a-d128-40bf-96b3-6b2aa787f62c.jsonl"
CODEX = (
    REAL / "codex-0.104" / "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
)


def lines_of(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def caught_load(path: Path | str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(path)
    said = [str(w.message) for w in caught if issubclass(w.category, TranscriptWarning)]
    # The real Claude Code file's replies carry partial usage, said once per load (that
    # warning has its own tests: tests/test_usage_partial.py).
    return t, [text for text in said if "(usage_partial)" not in text]


# -- names are data ------------------------------------------------------------------------------


def test_folders_named_like_patterns_are_read_as_themselves(tmp_path: Path):
    root = tmp_path / "root"
    short = lines_of(CODEX)[:40]
    for folder, lines in (("run*", short), ("run1", lines_of(CODEX)), ("qa", short)):
        (root / folder).mkdir(parents=True)
        (root / folder / CODEX.name).write_text("\n".join(lines) + "\n")
    (root / "q[ab]").mkdir()
    shutil.copy(CLAUDE, root / "q[ab]" / "only.jsonl")
    t, _ = caught_load(root)
    per_file = t.events.groupby("file", observed=True).size().to_dict()
    assert per_file == {
        str(root / "run*" / CODEX.name): 40,
        str(root / "run1" / CODEX.name): len(lines_of(CODEX)),
        str(root / "qa" / CODEX.name): 40,
        str(root / "q[ab]" / "only.jsonl"): len(lines_of(CLAUDE)),
    }
    # A folder whose name is a pattern matching a neighbour reads its own file, not `qa`'s.
    alone, _ = caught_load(str(root / "q[ab]"))
    assert set(alone.blocks["source"]) == {"claude_code"}
    assert len(alone.events) == len(lines_of(CLAUDE))


# -- nesting -------------------------------------------------------------------------------------


# -- a record's type is data ---------------------------------------------------------------------


def test_a_type_that_is_not_a_name_skips_its_file_or_item_without_failing(tmp_path: Path):
    # `type` as a list or an object: a file starting so is in no known format (skipped, said);
    # a Codex response item of such a type is left out, as an item of an unknown type is.
    for name, kind in (("list.jsonl", ["x"]), ("object.jsonl", {"a": 1})):
        (tmp_path / name).write_text(json.dumps({"type": kind, "payload": {}}) + "\n")
    lines = lines_of(CODEX)
    at = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "response_item")
    changed = json.loads(lines[at])
    changed["payload"]["type"] = ["message"]
    lines[at] = json.dumps(changed)
    (tmp_path / CODEX.name).write_text("\n".join(lines) + "\n")
    t, said = caught_load(tmp_path)
    for name in ("list.jsonl", "object.jsonl"):
        assert any(str(tmp_path / name) in s and "skipped" in s for s in said)
    whole, _ = caught_load(CODEX)
    line = at + 1
    assert line in set(whole.blocks["line"]) and line not in set(t.blocks["line"])
    assert len(t.blocks) == int((whole.blocks["line"] != line).sum())
    assert line in set(t.events["line"])


@pytest.mark.parametrize("source", [CODEX, CLAUDE])
def test_a_line_nested_100000_deep_is_an_unreadable_line(tmp_path: Path, source: Path):
    lines = lines_of(source)
    deep = "[" * 100_000 + "]" * 100_000
    if source is CODEX:
        deep = (
            '{"timestamp":"2026-02-23T11:40:24.000Z","type":"response_item","payload":' + deep + "}"
        )
    path = tmp_path / source.name
    path.write_text("\n".join([*lines[:5], deep, *lines[5:]]) + "\n")
    t, said = caught_load(path)
    assert t.skipped.get("unreadable line") == 1
    assert any("1 unreadable" in s and "line: 6" in s for s in said)
    assert len(t.events) == len(lines)  # every other record is there
    assert len(t.calls) == len(caught_load(source)[0].calls)


# -- numbers -------------------------------------------------------------------------------------

BAD_COUNTS = ["-5", "NaN", '"12"', "1e30", "1000000000001"]


@pytest.mark.parametrize("bad", BAD_COUNTS)
def test_a_usage_count_that_is_not_a_count_is_na_and_said(tmp_path: Path, bad: str):
    # Claude Code: the last record of the last response carries its final usage.
    lines = lines_of(CLAUDE)
    at = max(i for i, line in enumerate(lines) if '"usage"' in line)
    usage = json.loads(lines[at])["message"]["usage"]
    was = f'"output_tokens":{usage["output_tokens"]}'
    assert was in lines[at]
    lines[at] = lines[at].replace(was, f'"output_tokens":{bad}', 1)
    path = tmp_path / "claude" / CLAUDE.name
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    t, said = caught_load(path)
    assert t.calls["output_tokens"].isna().tolist() == [False, False, True]
    assert t.calls["input_tokens"].notna().all()  # the call's other counts are kept
    assert t.skipped == {"usage count not a count": 1}
    assert len(said) == 1 and f"line {at + 1}" in said[0] and "set to NA" in said[0]

    # Codex: the first call's last_token_usage.
    lines = lines_of(CODEX)
    at = next(i for i, line in enumerate(lines) if '"last_token_usage":{' in line)
    record = json.loads(lines[at])
    last = record["payload"]["info"]["last_token_usage"]
    head, _, tail = lines[at].partition('"last_token_usage":{')
    was = f'"input_tokens":{last["input_tokens"]}'
    lines[at] = head + '"last_token_usage":{' + tail.replace(was, f'"input_tokens":{bad}', 1)
    path = tmp_path / "codex" / CODEX.name
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    t, said = caught_load(path)
    first = t.calls.iloc[0]
    assert pd.isna(first["input_tokens"]) and pd.isna(first["context_sent_tokens"])
    assert t.calls["input_tokens"].iloc[1:].notna().all()
    assert t.skipped == {"usage count not a count": 1}
    assert len(said) == 1 and f"line {at + 1}" in said[0]


# -- clocks --------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CLAUDE_PARALLEL, CODEX])
def test_timestamps_that_run_backwards_do_not_stop_replay(tmp_path: Path, source: Path):
    records = [json.loads(line) for line in lines_of(source)]
    stamps = [r["timestamp"] for r in records if "timestamp" in r][::-1]
    for record in (r for r in records if "timestamp" in r):
        record["timestamp"] = stamps.pop(0)
    path = tmp_path / source.name
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    t, _ = caught_load(path)
    assert not t.calls["timestamp"].is_monotonic_increasing  # the clock ran backwards...
    assert t.calls["seq"].is_monotonic_increasing  # ...the records did not
    result = replay(t, {"none": [], "recorded": "recorded"})
    assert (
        result.calls.groupby("strategy")["call"].apply(list).tolist()
        == [t.calls["call"].tolist()] * 2
    )
    fresh = replay(source, {"none": []})
    assert result.totals.iloc[0]["calls"] == fresh.totals.iloc[0]["calls"]
