"""The cheap deterministic strategies of issue 34 (dedupe-reads, observation-masking's `every`,
interval-summary, clear-thinking, fold-files, summarise's `background_at`), each through the real
SDK against the loopback fake: the requests are valid, the strategy acts live as it says, and
replay of the recorded session (as recorded, and under the strategy itself) sends what the
live session sent; retention runs over the same replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.fake_api import FakeAnthropic, reply, text, tool_use, unmarked
from test_replay_fidelity import agent_requests, assert_reproduced, scripted_agent

from evo_magic import load_transcripts, replay
from evo_magic.analysis.retention import retention
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies.dedupe import DedupeReads
from evo_magic.strategies.registry import make_strategy


def live(
    workspace: Path, strategies: Sequence[Any], replies: Sequence[Any], asks: Sequence[str],
    **options: Any,
) -> tuple[Session, FakeAnthropic]:  # fmt: skip
    """The asks through the real SDK against the fake (agent calls answered by `replies` in
    turn, summaries by the offline model); every request must pass the fake's checks."""
    with FakeAnthropic(scripted_agent(*replies)) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=list(strategies), **options) as s:
            for ask in asks:
                s.ask(ask)
        server.assert_no_rejections()
    return s, server


def reads(*paths: str) -> list[Any]:
    return [reply(tool_use("read_file", {"path": p}, id=f"toolu_{i}")) for i, p in enumerate(paths)]


def results(body: dict) -> dict[str, str]:
    """tool_use_id -> the text of its result, in a request."""
    found = {}
    for message in body["messages"]:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block["content"]
                found[block["tool_use_id"]] = (
                    content if isinstance(content, str) else json.dumps(content)
                )
    return found


def assert_replays(s: Session, server: FakeAnthropic, strategies: Sequence[Any]) -> Any:
    """Replay of `s` as recorded and under `strategies` sends what it sent live."""
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": list(strategies)})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)
    return r


# -- dedupe-reads -------------------------------------------------------------------------------

READS = ("inventory.py", "README.md", "inventory.py", "samples.csv", "inventory.py")


def test_dedupe_reads_leaves_one_copy_of_an_unchanged_file_live_and_in_replay(workspace: Path):
    strategies = [DedupeReads(cache_aware=False)]
    s, server = live(workspace, strategies, reads(*READS), ["Read the project files."])
    last = results(agent_requests(server)[-1])
    original = (workspace / "inventory.py").read_text()
    assert original in last["toolu_4"]  # the newest read stays whole
    # Each older copy points to the read that made it a duplicate (once written, a pointer
    # is not rewritten: that would break the prompt cache again for nothing).
    for older, newer in (("toolu_0", "toolu_2"), ("toolu_2", "toolu_4")):
        assert last[older].startswith("[Unchanged: inventory.py was read again later")
        assert f"(tool use {newer})" in last[older] and original not in last[older]
    assert (workspace / "README.md").read_text() in last["toolu_1"]  # read once: kept
    third = results(agent_requests(server)[3])
    assert "toolu_2" in third["toolu_0"] and original in third["toolu_2"]
    # The transcript keeps every original.
    kept = (s.directory / "session.jsonl").read_text()
    assert kept.count(json.dumps(original)[1:-1][:200]) >= 3
    assert_replays(s, server, strategies)


def test_a_changed_file_read_again_is_not_a_duplicate(workspace: Path):
    first, second = reads("README.md"), reads("README.md")
    second[0] = reply(tool_use("read_file", {"path": "README.md"}, id="toolu_9"))
    change = {"path": "README.md", "content": "changed\n"}
    edit = reply(tool_use("write_file", change, id="toolu_w"))
    strategies = [DedupeReads(cache_aware=False)]
    s, server = live(workspace, strategies, [*first, edit, *second], ["Read, edit, read."])
    last = results(agent_requests(server)[-1])
    assert not last["toolu_0"].startswith("[Unchanged") and "changed" in last["toolu_9"]
    assert_replays(s, server, strategies)


def test_cache_aware_dedupe_waits_while_the_write_would_cost_more(workspace: Path):
    """With the prompt cache warm and a small file, replacing the old copy breaks the cache
    for less than it saves: it waits (the eager setting replaces at once)."""
    script = reads("README.md", "samples.csv", "README.md")
    eager, eager_server = live(workspace, [DedupeReads(cache_aware=False)], script, ["Read."])
    again = reads("README.md", "samples.csv", "README.md")
    aware, aware_server = live(workspace, [DedupeReads()], again, ["Read."])
    assert results(agent_requests(eager_server)[-1])["toolu_0"].startswith("[Unchanged")
    assert not results(agent_requests(aware_server)[-1])["toolu_0"].startswith("[Unchanged")
    assert_replays(aware, aware_server, [DedupeReads()])


def test_dedupe_reads_is_registered_and_retention_runs_over_its_replay(workspace: Path):
    made = make_strategy("dedupe-reads(cache_aware=False, tools=['read_file'])")
    assert made == DedupeReads(cache_aware=False, tools=frozenset({"read_file"}))
    s, server = live(workspace, [], reads(*READS), ["Read the project files."])
    measured = retention(load_transcripts(s.directory), {"none": [], "dedupe": [made]})
    totals = measured.totals[measured.totals["kind"] == "all"].set_index("strategy")
    # The text of every read is still in the context once: nothing a read showed is lost.
    assert totals.loc["dedupe", "kept_share"] == totals.loc["none", "kept_share"]
    r = replay(load_transcripts(s.directory), {"none": [], "dedupe": [made]})
    chars = r.calls.groupby("strategy", observed=True)["context_chars"].last()
    assert chars["dedupe"] < chars["none"]


# -- observation-masking(every=k) -------------------------------------------------------------


def masked_per_request(server: FakeAnthropic) -> list[int]:
    return [
        sum(v.startswith("[Old tool output omitted") for v in results(body).values())
        for body in agent_requests(server)
    ]


def test_masking_every_k_moves_the_window_k_turns_at_a_time(workspace: Path):
    """keep_turns=2: with every=1 each new turn masks one more; with every=3 the window moves
    every third turn by three, so the prompt between moves only grows (the cache holds)."""
    script = ["samples.csv"] * 8
    eager = make_strategy("observation-masking(keep_turns=2)")
    polled = make_strategy("observation-masking(keep_turns=2, every=3)")
    _, eager_server = live(workspace, [eager], reads(*script), ["Read it, again and again."])
    s, server = live(workspace, [polled], reads(*script), ["Read it, again and again."])
    assert masked_per_request(eager_server) == [0, 0, 0, 1, 2, 3, 4, 5, 6]
    assert masked_per_request(server) == [0, 0, 0, 0, 0, 3, 3, 3, 6]
    # Between moves each request extends the one before: nothing in it was rewritten.
    bodies = agent_requests(server)
    for before, after in ((5, 6), (6, 7)):
        old = unmarked(bodies[before]["messages"])  # cache breakpoints move, as they should
        new = unmarked(bodies[after]["messages"])
        assert json.dumps(new[: len(old) - 1]) == json.dumps(old[:-1])
    assert_replays(s, server, [polled])


# -- interval-summary ---------------------------------------------------------------------------


def test_interval_summary_summarises_every_n_turns_keeping_m_and_masks_between(
    workspace: Path,
):
    strategy = make_strategy("interval-summary(every=4, keep=2)")
    s, server = live(workspace, [strategy], reads(*["inventory.py"] * 7), ["Keep reading."])
    bodies = agent_requests(server)
    heads = [body["messages"][0]["content"] for body in bodies]
    summarised = [i for i, head in enumerate(heads) if "compacted" in json.dumps(head).lower()]
    assert summarised, "no summary"
    first = summarised[0]
    # The history held 4 steps: the request after it opens with the summary, then the last 2
    # steps verbatim (their results whole).
    after = bodies[first]["messages"]
    steps = [m for m in after if m["role"] == "assistant"]
    assert len(steps) == 2
    kept = [v for v in results(bodies[first]).values()]
    assert kept and all("omitted" not in v for v in kept)
    # Before it, the results older than 2 turns were masked.
    assert any("omitted" in v for v in results(bodies[first - 1]).values())
    # 7 steps: a summary when the history holds 4 (before the 5th request), then 2 kept and
    # 2 new make 4 again (before the 7th): two summaries.
    assert first == 4 and s.state.compact_count == 2
    assert_replays(s, server, [strategy])


# -- clear-thinking -------------------------------------------------------------------------------


def thinking(n: int) -> dict:
    return {"type": "thinking", "thinking": f"Let me think about step {n}. " * 40,
            "signature": f"sig-{n}"}  # fmt: skip


def test_clear_thinking_drops_the_thinking_of_older_turns_only(workspace: Path):
    strategy = make_strategy("clear-thinking(cache_aware=False)")
    script = [
        reply(thinking(0), tool_use("read_file", {"path": "README.md"}, id="toolu_a")),
        reply(thinking(1), text("First answer.")),
        reply(thinking(2), text("Second answer.")),
        reply(thinking(3), tool_use("read_file", {"path": "README.md"}, id="toolu_b")),
        reply(thinking(4), text("Third answer.")),
    ]
    s, server = live(workspace, [strategy], script, ["One.", "Two.", "Three."])

    def thought(body: dict) -> list[str]:
        return [
            b["signature"]
            for m in body["messages"]
            if m["role"] == "assistant"
            for b in m["content"]
            if b.get("type") == "thinking"
        ]

    bodies = agent_requests(server)
    assert thought(bodies[1]) == ["sig-0"]  # the turn goes on: its thinking stays
    assert thought(bodies[2]) == ["sig-0", "sig-1"]  # ask 1's loop is one turn: kept
    assert thought(bodies[3]) == ["sig-2"]  # ask 1's turn cleared once ask 2 answered
    assert thought(bodies[4]) == ["sig-3"]  # the third ask's loop keeps its own thinking
    # Replay rebuilds the thinking (its text; no usable signature is kept): the strategy clears
    # it there from the call it cleared it live, and leaves the calls before alone.
    r = replay(load_transcripts(s.directory), {"none": [], "clear-thinking": [strategy]})
    sizes = r.calls.groupby("strategy", observed=True)["context_chars"].apply(list)
    none, cleared = sizes["none"], sizes["clear-thinking"]
    assert cleared[:3] == none[:3]
    assert all(c < n for c, n in zip(cleared[3:], none[3:], strict=True))


# -- fold-files -----------------------------------------------------------------------------------


def test_fold_files_puts_the_signatures_of_python_files_read_after_the_summary(workspace: Path):
    strategy = make_strategy("fold-files")
    script = reads("inventory.py", "README.md", "samples.csv")
    s, server = live(workspace, [strategy], script, ["Read the files."], context_limit=9_000)
    assert s.state.compact_count == 1
    opening = agent_requests(server)[-1]["messages"][0]["content"]
    folded = opening[-1]["text"]
    assert folded.startswith("Signatures of the source files read")
    assert "## inventory.py" in folded and "README.md" not in folded  # source files only
    source = (workspace / "inventory.py").read_text()
    assert sum(" def " in f" {line}" for line in folded.splitlines()) >= 2
    for line in folded.splitlines()[2:]:
        name = line.strip().split(" ", 2)[1].split("(")[0].rstrip(":")
        assert f"def {name}(" in source or f"class {name}" in source, line
    assert "return" not in folded  # bodies folded
    assert_replays(s, server, [strategy])


def test_fold_files_reads_claude_codes_numbered_lines():
    from evo_magic.strategies.fold import signatures

    shown = (
        '     1→"""A module."""\n     2→\n     3→class Box(Base):\n'
        "     4→    def open(self, lid: int = 1) -> bool:\n     5→        return True\n"
        "\n<system-reminder>Whenever you read a file, consider...</system-reminder>\n"
    )
    assert list(signatures(shown)) == [
        "class Box(Base):",
        "    def open(self, lid: int=1) -> bool: ...",
    ]
    assert list(signatures(shown.replace("→", "\t"))) == list(signatures(shown))
    assert list(signatures("def broken(:\n")) == []
