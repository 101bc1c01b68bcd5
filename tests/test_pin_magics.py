"""`%agent pin / unpin / pins`, a token limit as a share of the window, and max_refills, in a
real InteractiveShell talking to the loopback fake through the real SDK."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from test_magics import magics

from evo_magic.compacted import FILE_PIN_PREFIX, PIN_PREFIX
from evo_magic.models.catalog import context_window

PIN = "Never use tabs; the public API must not change."


def user_texts(body: dict) -> list[str]:
    return [
        block["text"]
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text"
    ]


def test_pin_pins_and_unpin(ip, api, workspace: Path):
    (workspace / "AGENTS.md").write_text("Run the tests before you commit.\n")
    with capture_output() as out:
        ip.run_line_magic("agent", f"pin {PIN}")
        ip.run_line_magic("agent", "pin Don't touch setup.py, it's generated.")
        ip.run_line_magic("agent", "pin --file AGENTS.md")
        ip.run_line_magic("agent", "pins")
    assert "pinned as pin 1" in out.stdout and "pinned AGENTS.md as pin 3" in out.stdout
    assert f"1: {PIN}" in out.stdout and "2: Don't touch setup.py, it's generated." in out.stdout
    session = magics(ip).sessions["default"]
    assert [text for _, text in session.pins] == [
        PIN,
        "Don't touch setup.py, it's generated.",
        "Run the tests before you commit.\n",
    ]
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
    requests = [body for body in api.accepted if body.get("tools")]
    assert requests
    file_block = FILE_PIN_PREFIX.format(path="AGENTS.md") + "Run the tests before you commit.\n"
    for body in requests:
        assert PIN_PREFIX + PIN in user_texts(body) and file_block in user_texts(body)
    with capture_output() as out:
        ip.run_line_magic("agent", "unpin 2")
        ip.run_line_magic("agent", "pins")
    assert "unpinned 2" in out.stdout and "2: " not in out.stdout.split("unpinned 2")[1]
    assert [pin_id for pin_id, _ in session.pins] == [1, 3]
    with pytest.raises(UsageError, match="no pin 7"):
        ip.run_line_magic("agent", "unpin 7")
    with pytest.raises(UsageError, match="one pin id"):
        ip.run_line_magic("agent", "unpin one")
    with pytest.raises(UsageError, match="needs the text"):
        ip.run_line_magic("agent", "pin   ")
    with pytest.raises(UsageError, match="outside|not inside|escapes|workspace"):
        ip.run_line_magic("agent", "pin --file ../../etc/passwd")


def test_a_share_of_the_window_as_token_limit(ip, api):
    ip.run_line_magic("config", "AgentMagics.token_limit = 0.8")
    ip.run_line_magic("config", "AgentMagics.max_refills = 1")
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 2", "Look around.")
    session = magics(ip).sessions["default"]
    window = context_window(session.model.name)
    assert window is not None
    assert session.policy.max_refills == 1
    assert session.token_limit == int(window * 0.8)
    with capture_output() as out:
        ip.run_line_magic("agent", "context")
    assert f"{int(window * 0.8):,} tokens" in out.stdout
    ip.run_line_magic("config", "AgentMagics.token_limit = 1.5")  # refused, said, unchanged
    assert magics(ip).token_limit == 0.8 and session.policy.token_limit == 0.8
