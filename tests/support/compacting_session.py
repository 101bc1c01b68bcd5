"""A real evo_magic Session, through the SDK and the loopback fake, that reads files, compacts
twice (the user's compactions, with given summaries), then re-reads some files, re-runs a
command, changes a file and reads it again: for after_compaction and rewind."""

from __future__ import annotations

from pathlib import Path

from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from support.fake_api import FakeAnthropic
from support.fake_api.script import reply, text, tool_use

STEPS = [
    [tool_use("read_file", {"path": "a.txt"})],
    [tool_use("read_file", {"path": "b.txt"}), tool_use("bash", {"command": "cat c.txt"})],
    [tool_use("edit_file", {"path": "c.txt", "old_str": "line of c", "new_str": "line of C"})],
    [tool_use("read_file", {"path": "a.txt"})],  # a repeat before any compaction
    [text("I read a, b and c, and changed c.")],
    # compacted here (the user's compaction)
    [tool_use("read_file", {"path": "b.txt"})],  # the same read, unchanged
    [tool_use("bash", {"command": "cat c.txt"})],  # the same command; c changed since: no re-read
    [tool_use("write_file", {"path": "a.txt", "content": "new\n"})],  # new work
    [tool_use("read_file", {"path": "a.txt"})],  # changed since: not a repeat
    [tool_use("read_file", {"path": "./missing.txt"})],  # an error: no read
    [text("Changed a.")],
    # compacted again
    [tool_use("read_file", {"path": "a.txt"})],  # read before this boundary, unchanged
    [tool_use("read_file", {"path": "d.txt"})],  # the file is not there: an error
    [text("Done.")],
]
ASKS = ("Read the files, and never touch d.txt.", "Go on.", "Finish.")


def compacting_session(root: Path) -> Path:
    """The session's directory (its transcript), made under `root`."""
    workspace = root / "work"
    workspace.mkdir(parents=True)
    for name in ("a.txt", "b.txt", "c.txt"):
        (workspace / name).write_text(f"the first line of {name[0]}\n" + "more text\n" * 40)
    with FakeAnthropic() as server:
        server.queue(*(reply(*blocks) for blocks in STEPS))
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model) as session:
            session.ask(ASKS[0])
            assert session.compact(summary="We read a, b and c, and changed c.").success
            session.ask(ASKS[1])
            assert session.compact(summary="We changed a.").success
            session.ask(ASKS[2])
        server.assert_no_rejections()
    return session.directory
