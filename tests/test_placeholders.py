"""The one placeholder rule (`evo_magic.strategies.placeholders`): every strategy that replaces
a tool result by a placeholder points the model to `recall` when the session offers it, and
keeps its own words, exactly, when it does not. Live through the real SDK against the
loopback fake, and in replay (as recorded and under the strategies)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cheap_strategies import assert_replays, live, reads, results
from test_replay_fidelity import agent_requests

from evo_magic.strategies import MicroCompact, Recall
from evo_magic.strategies.registry import make_strategy

READS = ("inventory.py", "README.md", "samples.csv", "inventory.py")
SWE_AGENT = "Old environment output: ({lines} lines omitted)"

STRATEGIES = {
    "observation-masking": [
        make_strategy(f"observation-masking(keep_turns=1, placeholder={SWE_AGENT!r})")
    ],
    "observation-masking default": [make_strategy("observation-masking(keep_turns=1)")],
    "interval-summary": [make_strategy("interval-summary(every=20, keep=1)")],
    "clear-tool-uses": [make_strategy("clear-tool-uses(trigger_tool_uses=1, keep=1)")],
    "micro": [MicroCompact(keep_recent=1, cache_aware=False)],
}


def _first_result_in_the_last_request(
    workspace: Path, strategies: list, with_recall: bool
) -> tuple[str, str]:
    chosen = [*strategies, Recall()] if with_recall else strategies
    s, server = live(workspace, chosen, reads(*READS), ["Read the project files."])
    placeholder = results(agent_requests(server)[-1])["toolu_0"]
    assert_replays(s, server, chosen)
    lines = (workspace / "inventory.py").read_text().count("\n") + 1
    return placeholder, str(lines)


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_a_placeholder_points_to_recall_when_it_is_offered(workspace: Path, kind: str):
    placeholder, _ = _first_result_in_the_last_request(workspace, STRATEGIES[kind], True)
    assert placeholder.endswith('The original is kept: use recall(id="toolu_0") to read it again.]')
    assert "Run the tool again" not in placeholder and "Re-run the tool" not in placeholder


def test_without_recall_each_keeps_its_own_words(workspace: Path):
    for kind, strategies in STRATEGIES.items():
        folder = workspace.parent / kind.replace(" ", "-")
        folder.mkdir()
        for path in workspace.iterdir():
            if path.is_file():
                (folder / path.name).write_bytes(path.read_bytes())
        placeholder, lines = _first_result_in_the_last_request(folder, strategies, False)
        assert "recall" not in placeholder, kind
        own = {
            "observation-masking": SWE_AGENT.format(lines=lines),  # the benchmark's, exact
            "observation-masking default": f"[Old tool output omitted: {lines} lines. Run the "
            "tool again if you need it.]",
            "interval-summary": f"[Old tool output omitted: {lines} lines. Run the tool again "
            "if you need it.]",
            "clear-tool-uses": "[Tool result cleared to save context. Run the tool again if "
            "you need it.]",
            "micro": "[Earlier tool result compacted. Re-run the tool if you need full detail.]",
        }[kind]
        assert placeholder == own, kind


def test_the_swe_agent_placeholder_keeps_its_words_and_gains_the_note(workspace: Path):
    strategies = STRATEGIES["observation-masking"]
    placeholder, lines = _first_result_in_the_last_request(workspace, strategies, True)
    note = 'The original is kept: use recall(id="toolu_0") to read it again.'
    assert placeholder == f"Old environment output: ({lines} lines omitted) [{note}]"
