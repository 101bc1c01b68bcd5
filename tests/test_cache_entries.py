"""The caches on disk (probe answers, real summaries) are data: an entry whose usage is not
token counts, or that is not a regular file, is a miss (asked again and rewritten), never a
crash, a negative or an infinite cost."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from evo_magic import replay, retention
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import FunctionModel, ModelRequest
from evo_magic.session import Session
from evo_magic.strategies import Summarise

CODENAME = "BLUE-HERON-7"
USAGE = {"input_tokens": 1_000, "output_tokens": 10}


def _bad_usage(value: Any) -> dict[str, Any]:
    return {"reply": CODENAME, "text": "cached", "model": "m", "usage": {**USAGE, **value}}


DAMAGED = {
    "a negative count": _bad_usage({"input_tokens": -(10**9)}),
    "a count of 1e308": _bad_usage({"output_tokens": 1e308}),
    "a count as text": _bad_usage({"input_tokens": "1000"}),
    "a fractional count": _bad_usage({"input_tokens": 10.5}),
    "a count over 10^12": _bad_usage({"input_tokens": 10**15}),
    "usage not an object": {"reply": CODENAME, "usage": [1, 2]},
    "a reply not text": {"reply": {"x": 1}, "usage": USAGE},
    "not an object": [CODENAME],
    "not JSON": "{not json",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("work")

    def answer(request: ModelRequest) -> list[dict[str, Any]]:
        return [{"type": "text", "text": "Noted. " * 400}]

    with Session(workspace, model=FunctionModel(answer, name="claude-sonnet-4-5")) as session:
        session.ask(f"The codename for this job is {CODENAME}. Remember it.")
        for n in range(4):
            session.ask(f"Step {n}: carry on, and say what you did at length.")
    return session.directory


def _reader(asked: list[int]) -> FunctionModel:
    def read(request: ModelRequest) -> dict[str, Any]:
        asked.append(1)
        return {"content": [{"type": "text", "text": CODENAME}], "usage": USAGE}

    return FunctionModel(read, name="claude-sonnet-4-5")


def _write(entry: Path, damage: Any) -> None:
    entry.write_text(damage if isinstance(damage, str) else json.dumps(damage), encoding="utf-8")


@pytest.mark.parametrize("damage", list(DAMAGED), ids=list(DAMAGED))
def test_a_damaged_probe_cache_entry_is_a_miss(recorded: Path, tmp_path: Path, damage: str):
    asked: list[int] = []
    options = {"facts": [CODENAME], "reader": _reader(asked), "cache_dir": tmp_path}
    first = retention(recorded, {"none": []}, **options)
    cost = first.totals["probe_cost_usd"].iloc[0]
    assert cost > 0 and len(asked) == 1
    (entry,) = (tmp_path / "probes").iterdir()
    _write(entry, DAMAGED[damage])
    again = retention(recorded, {"none": []}, **options)
    assert len(asked) == 2  # asked again
    assert again.totals["probe_cost_usd"].iloc[0] == pytest.approx(cost)
    retention(recorded, {"none": []}, **options)
    assert len(asked) == 2  # and rewritten whole


def test_a_probe_cache_entry_that_is_no_regular_file_is_a_miss(recorded: Path, tmp_path: Path):
    asked: list[int] = []
    options = {"facts": [CODENAME], "reader": _reader(asked), "cache_dir": tmp_path}
    first = retention(recorded, {"none": []}, **options)
    (entry,) = (tmp_path / "probes").iterdir()
    outside = tmp_path / "planted.json"
    outside.write_text(json.dumps(DAMAGED["a negative count"]), encoding="utf-8")
    entry.unlink()
    entry.symlink_to(outside)  # a link is not followed
    linked = retention(recorded, {"none": []}, **options)
    assert len(asked) == 2 and linked.totals["probe_cost_usd"].iloc[0] > 0
    entry.unlink()
    os.mkfifo(entry)  # neither read (it would block) nor written through
    fifo = retention(recorded, {"none": []}, **options)
    assert len(asked) == 3
    assert fifo.totals["probe_cost_usd"].iloc[0] == first.totals["probe_cost_usd"].iloc[0]


def test_a_damaged_summary_cache_entry_is_a_miss(recorded: Path, tmp_path: Path):
    asked: list[int] = []

    def summarise(request: ModelRequest) -> dict[str, Any]:
        asked.append(1)
        return {"content": [{"type": "text", "text": "A REAL SUMMARY."}], "usage": USAGE}

    options = {
        "policy": CompactPolicy(context_limit=2_500),
        "summariser": FunctionModel(summarise, name="claude-sonnet-4-5"),
        "cache_dir": tmp_path,
        "model": "claude-sonnet-4-5",
    }
    first = replay(recorded, {"summarise": [Summarise()]}, **options)
    made = len(asked)
    assert made > 0
    cost = first.totals["cost_usd"].iloc[0]
    entries = list(tmp_path.rglob("*.json"))
    assert entries
    for n, entry in enumerate(entries):
        _write(entry, DAMAGED["a negative count" if n % 2 else "a count of 1e308"])
    again = replay(recorded, {"summarise": [Summarise()]}, **options)
    assert len(asked) == 2 * made  # every damaged entry summarised again
    total = again.totals["cost_usd"].iloc[0]
    assert math.isfinite(total) and total == pytest.approx(cost)
