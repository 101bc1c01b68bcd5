"""A large tool output is saved once; its file, which the context points to, is never rewritten."""

from __future__ import annotations

from pathlib import Path

from support.fake_api import FakeAnthropic, reply, text, tool_use

from evo_magic.session import Session
from evo_magic.strategies import LargeOutputs, MicroCompact, Summarise
from evo_magic.strategies.large_outputs import is_preview


def test_lowering_the_limit_never_moves_a_preview_again(
    fake: FakeAnthropic, claude, workspace: Path
):
    (workspace / "big.txt").write_text("x" * 40_000 + "\n")
    fake.queue(
        reply(tool_use("read_file", {"path": "big.txt"}, id="toolu_big")),
        reply(text("ok")),
        reply(text("still ok")),
    )
    session = Session(workspace, model=claude)
    session.ask("Read big.txt")
    saved = session.directory / "tool-results" / "toolu_big.txt"
    full = saved.read_text()
    preview = session.messages[2]["content"][0]["content"]
    assert full.startswith("x" * 40_000) and is_preview(preview) and len(preview) > 1_000

    # A lower limit (as %config sets it): the preview is now over the limit itself.
    session.configure(strategies=[LargeOutputs(limit=1_000), MicroCompact(), Summarise()])
    session.ask("And now?")
    assert saved.read_text() == full  # not overwritten with the preview
    assert session.messages[2]["content"][0]["content"] == preview  # not moved again
    assert sorted(p.name for p in saved.parent.iterdir()) == ["toolu_big.txt"]


def test_a_result_that_only_looks_like_a_preview_is_still_moved() -> None:
    """The marker alone does not make a preview: the characters after it must be exactly as many
    as it announces (a file that merely quotes a marker is an output like any other)."""
    marker = (
        "[Output too large for the context: 50,000 characters, saved to tool-results/a.txt. "
        "Read it with read_file (offset/limit) if you need more. The first 10 characters:]\n"
    )
    assert is_preview(marker + "0123456789")
    assert not is_preview(marker + "0123456789" + "y" * 5_000)
    assert not is_preview("x" * 100)
