"""Linear-time properties of retention guarded by counting work, not seconds (its speed lives in
benchmarks/bench_retention.py): following the facts into a call reads what the call added or a
strategy changed, not the whole context, however long the history; each distinct text is searched
for the facts once, however many strategy settings see it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from evo_magic import load_transcripts, retention
from evo_magic.analysis.replay import ReplayedCall
from evo_magic.analysis.retention import kept as kept_module
from evo_magic.analysis.retention.facts import Tracked
from evo_magic.analysis.retention.kept import Follow, Matcher
from evo_magic.events import MicroCompacted
from evo_magic.measure import ContextSize

PLACEHOLDER = "[Earlier tool result compacted. Re-run the tool if you need full detail.]"


class Counted(Sequence[dict[str, Any]]):
    """A context as the follower sees it, counting every message it reads."""

    def __init__(self, messages: list[dict[str, Any]]):
        self._messages = messages
        self.reads = 0

    def __getitem__(self, index: Any) -> Any:
        got = self._messages[index]
        self.reads += len(got) if isinstance(index, slice) else 1
        return got

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for message in self._messages:
            self.reads += 1
            yield message


def _round(n: int) -> list[dict[str, Any]]:
    """A tool round: the call, then its result (every tenth holds a fact)."""
    output = f"fact-{n}: the value is {n}" if n % 10 == 0 else f"listing {n}"
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "bash",
                                           "input": {"command": f"ls {n}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                      "content": output}]},
    ]  # fmt: skip


def _masked(messages: list[dict[str, Any]], index: int) -> MicroCompacted:
    """The result at `index` replaced by a placeholder, as an every-call strategy does."""
    old = messages[index]["content"][0]
    block = {**old, "content": PLACEHOLDER}
    messages[index] = {"role": "user", "content": [block]}
    size = ContextSize(messages=len(messages), chars=0, tokens=0)
    edits = json.dumps([{"index": index, "block_index": 0, "block": block}])
    return MicroCompacted((old["tool_use_id"],), 0, size, size, "masking", edits_json=edits)


def _followed(rounds: int) -> tuple[list[int], list[int], Follow]:
    """Each call's reads of the context and texts searched, over `rounds` tool rounds (a
    result masked in place at every call from the tenth on)."""
    facts = [
        Tracked("s", f"custom-{n}", "custom", f"fact-{n}: the value is {n}", "given", None, None)
        for n in range(0, rounds, 10)
    ]
    matcher = Matcher(facts)
    follow = Follow("masking", facts, list(range(0, rounds, 10)), matcher, None)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Begin."}]
    reads, searched = [], []
    for n in range(rounds):
        messages += _round(n)
        changes = (_masked(messages, 2 * (n - 10) + 2),) if n >= 10 else ()
        context, before = Counted(messages), matcher.searched
        follow(ReplayedCall("masking", "s", None, n, context, changes))
        reads.append(context.reads)
        searched.append(matcher.searched - before)
    follow.finish()
    return reads, searched, follow


def test_a_call_reads_what_it_added_and_what_a_strategy_rewrote_at_any_length():
    short, short_searched, _ = _followed(100)
    long, long_searched, follow = _followed(2_000)  # 4,001 messages at the end
    # After the first call: two messages added, one rewritten, whatever the length.
    assert max(short[1:]) == max(long[1:]) <= 8  # the ends compared, the edit, the new two
    assert max(long_searched) <= 3  # the two new blocks' texts and the placeholder's, once
    # And the count is right: each fact was held for ten calls, until its result was masked.
    assert [s.kept_calls for s in follow.states] == [10] * len(follow.states)
    assert follow.states[5].lost_at_call == 60 and follow.states[5].lost_by == "masking"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.claude_code_session import write_session

    return load_transcripts(write_session(tmp_path_factory.mktemp("session"), calls=120))


def _searches(monkeypatch: pytest.MonkeyPatch) -> list[Matcher]:
    """Every Matcher retention makes, kept to read its count of texts searched."""
    made: list[Matcher] = []
    real = kept_module.Matcher.__init__

    def noted(self: Matcher, facts: Any) -> None:
        real(self, facts)
        made.append(self)

    monkeypatch.setattr(kept_module.Matcher, "__init__", noted)
    return made


@pytest.mark.filterwarnings("ignore")
def test_each_text_is_searched_once_for_every_setting_that_sends_it(
    generated: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _searches(monkeypatch)
    one = retention(generated, {"none": []}, model="claude-sonnet-4-5")
    ((matcher,),) = [made]
    alone = matcher.searched
    made.clear()
    three = retention(generated, {"a": [], "b": [], "c": []}, model="claude-sonnet-4-5")
    # Three settings that change nothing search no text the first did not: each once.
    assert [m.searched for m in made] == [alone]
    assert len(one.facts) > 50 and one.kept["kept_at_end"].all()
    expected = one.kept.drop(columns="strategy").reset_index(drop=True)
    for label in "abc":
        rows = three.kept[three.kept["strategy"] == label].drop(columns="strategy")
        assert rows.reset_index(drop=True).equals(expected)
