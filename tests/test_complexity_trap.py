"""The Complexity Trap's settings as the benchmark script replays them, on real mini-swe-agent
runs: the LLM-Summary agent summarises alone, the hybrid masks once with SWE-agent's placeholder
and summarises."""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from pathlib import Path

import pytest

from evo_magic import load_transcripts, replay

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "complexity_trap.py"


def _script():
    spec = importlib.util.spec_from_file_location("complexity_trap", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    trap = _script()
    work = tmp_path_factory.mktemp("trap")
    for folder in ("mini-swe-agent-2.2", "mini-swe-agent-2.3"):
        shutil.copytree(trap.REAL / folder, work / folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the runs' own models have no price
        r = replay(load_transcripts(work), trap.SETTINGS, model="claude-sonnet-4-5")
    return trap, r


def _by_call(r, label):
    mine = r.calls[r.calls["strategy"] == label]
    return mine.set_index(["session_id", "agent_id", "call"]).sort_index()


def test_the_llm_summary_agent_masks_nothing_before_its_first_summary(replayed):
    trap, r = replayed
    raw, masking, summary = (_by_call(r, label) for label in list(trap.SETTINGS)[:3])
    before = summary["compactions_so_far"] == 0
    assert before.sum() > 40  # 20 steps of each run before the first summary
    # What the raw agent sends, call for call, although masking hides something by then.
    assert summary.loc[before, "context_chars"].equals(raw.loc[before, "context_chars"])
    assert (masking.loc[before, "context_chars"] < raw.loc[before, "context_chars"]).any()
    assert r.totals.set_index("strategy").loc[list(trap.SETTINGS)[2], "compactions"] > 0


def test_the_hybrids_mask_once_with_swe_agents_placeholder_then_summarise(replayed):
    trap, r = replayed
    labels = list(trap.SETTINGS)
    masking = _by_call(r, labels[1])
    totals = r.totals.set_index("strategy")
    for label in labels[3:]:
        hybrid = _by_call(r, label)
        before = hybrid["compactions_so_far"] == 0
        # Before its first summary a hybrid sends exactly what observation masking sends: the
        # same results masked, once, with the same placeholder.
        assert hybrid.loc[before, "context_chars"].equals(masking.loc[before, "context_chars"])
        assert totals.loc[label, "compactions"] > 0
    # Every 21 turns summarises as often as the LLM summary; every 43, less often.
    assert totals.loc[labels[3], "compactions"] == totals.loc[labels[2], "compactions"]
    assert totals.loc[labels[4], "compactions"] < totals.loc[labels[3], "compactions"]
