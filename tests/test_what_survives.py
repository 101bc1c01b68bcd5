"""What survives a summary: the newest prompts verbatim (Codex's rule) and the recent files read
again (Claude Code's rule), with the seed's layout unchanged when both are off."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, reply, text, tool_use, validate_messages
from support.responders import offline_responder

from evo_magic.compact.base import Context
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import (
    COMPACTED_HEADER,
    FILES_HEADER,
    REMINDER_PREFIX,
    REQUEST_HEADER,
    REREAD_HEADER,
)
from evo_magic.events import CompactionFinished
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Summarise
from evo_magic.strategies.registry import make_strategy
from evo_magic.tools.files import read_text


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def step(n: int, output: str = "o" * 300) -> list[dict[str, Any]]:
    """One tool call and its result."""
    use = {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def tokens(text: str) -> int:
    """Tokens of a prompt kept as its own user message: its compact JSON at 4 characters a
    token (the calibration of a context outside a session)."""
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return round(len(json.dumps(message, separators=(",", ":"))) * 0.25)


PROMPTS = [f"Prompt {n}: " + "please look at the parser " * (n * 3) for n in range(1, 6)]
PENDING = "Now fix the failing test in the parser."


def conversation() -> list[dict[str, Any]]:
    """An earlier summary, five answered prompts with tool calls (one with a budget note on
    it), then the pending request with a call under way."""
    messages = [user(f"{COMPACTED_HEADER}\n\nan older summary")]
    for n, prompt in enumerate(PROMPTS):
        messages += [answer("ok")] if n else []
        messages.append(
            user(prompt, REMINDER_PREFIX + "1,000 tokens used") if n == 2 else user(prompt)
        )
        messages += [*step(2 * n), answer(f"done {n}")]
    messages.append(user(PENDING))
    messages += step(99)
    return messages


def compact(strategy: Summarise, messages: list[dict[str, Any]], **options: Any) -> Any:
    ctx = Context.for_messages(
        messages, pending_request=PENDING, summarise=lambda m, f: "SUMMARY", **options
    )
    return strategy.compact(messages, ctx), ctx


def texts(message: dict[str, Any]) -> list[str]:
    return [b["text"] for b in message["content"]]


def test_keep_user_tokens_keeps_exactly_the_newest_prompts_that_fit():
    messages = conversation()
    newest_three = sum(tokens(p) for p in PROMPTS[2:])
    result, ctx = compact(Summarise(keep_user_tokens=newest_three), messages)
    assert validate_messages(result) is None
    head, *kept, request = result
    # The summary first (the seed's text without the request), the prompts verbatim and oldest
    # first (the budget note left out of the third), the pending request last.
    assert texts(head)[0].startswith(COMPACTED_HEADER) and REQUEST_HEADER not in texts(head)[0]
    assert [texts(m) for m in kept] == [[p] for p in PROMPTS[2:]]
    assert texts(request) == [f"{REQUEST_HEADER}\n{PENDING}"]
    assert ctx.details == {"kept_prompts": 3, "kept_prompt_tokens": newest_three}
    # One token less: the third newest no longer fits, and nothing older is taken past it.
    result, ctx = compact(Summarise(keep_user_tokens=newest_three - 1), messages)
    assert [texts(m) for m in result[1:-1]] == [[p] for p in PROMPTS[3:]]
    # A budget smaller than the newest prompt keeps none, but the pending request is carried.
    result, ctx = compact(Summarise(keep_user_tokens=tokens(PROMPTS[-1]) - 1), messages)
    assert len(result) == 2 and texts(result[-1]) == [f"{REQUEST_HEADER}\n{PENDING}"]
    assert ctx.details["kept_prompts"] == 0


def test_kept_prompts_survive_the_next_compaction_and_the_summary_is_never_kept():
    first, _ = compact(Summarise(keep_user_tokens=10_000), conversation())
    later = [*first, *step(200), answer("fixed"), user("And now the docs."), *step(201)]
    ctx = Context.for_messages(
        later, pending_request="And now the docs.", summarise=lambda m, f: "SUMMARY 2"
    )
    head, *kept, request = Summarise(keep_user_tokens=10_000).compact(later, ctx)
    # The prompts kept last time are prompts again; the request answered since is one too,
    # read without its header; no compacted summary is ever taken for a prompt.
    assert [texts(m)[0] for m in kept] == [*PROMPTS, PENDING]
    assert texts(request) == [f"{REQUEST_HEADER}\nAnd now the docs."]
    assert not any(COMPACTED_HEADER in t for m in kept for t in texts(m))


def test_the_defaults_are_the_seed_byte_for_byte():
    messages = conversation()
    options = {"focus": "F", "recent_files": ["a.py"]}
    seed, ctx = compact(Summarise(), messages, **options)
    assert seed == [ctx.compacted_message("SUMMARY")]
    explicit, _ = compact(Summarise(keep_user_tokens=0, reread_files=0), messages, **options)
    assert json.dumps(explicit) == json.dumps(seed)


def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A workspace with a short file, a long one, a binary one, a link to a file outside."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    files = {
        "notes.md": "# Notes\nThe parser fails on empty lines.\n",
        "src/parser.py": "def parse(text):\n    return text.split()\n",
        "data/big.csv": "id,value\n" + "".join(f"{i},{i * i}\n" for i in range(3_000)),
    }
    for name, content in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(content)
    (workspace / "image.bin").write_bytes(b"\x89PNG\0\0\0")
    (tmp_path / "secret.txt").write_text("SECRET-OUTSIDE-THE-WORKSPACE\n")
    os.symlink(tmp_path / "secret.txt", workspace / "link.txt")
    return workspace, files


def test_reread_files_puts_small_files_back_whole_and_lists_the_rest(tmp_path: Path):
    workspace, files = project(tmp_path)
    recent = ["old.py", "../secret.txt", "link.txt", "image.bin", "data/big.csv", "notes.md"]
    recent.append("src/parser.py")
    strategy = Summarise(reread_files=6, reread_max_tokens=1_000)
    result, ctx = compact(
        strategy,
        conversation(),
        recent_files=recent,
        read_file=lambda path, limit: read_text(workspace, path, limit),
    )
    assert validate_messages(result) is None
    head, request = result
    summary, *reread = texts(head)
    # The two small files are back whole, exactly as on disk, oldest first.
    assert reread == [f"{REREAD_HEADER}{p}\n{files[p]}" for p in ("notes.md", "src/parser.py")]
    # Every other recent file is listed by path; the one past the six is listed as the seed does.
    listed = summary.split(FILES_HEADER + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert listed == [f"- {p}" for p in recent[:5]]
    # Nothing from outside the workspace entered the history.
    assert "SECRET" not in json.dumps(result)
    assert texts(request) == [f"{REQUEST_HEADER}\n{PENDING}"]
    records = {r["path"]: r for r in ctx.details["reread_files"]}
    assert set(records) == set(recent[1:])
    assert [p for p, r in records.items() if r["whole"]] == ["src/parser.py", "notes.md"]
    for path in ("notes.md", "src/parser.py"):
        block = {"type": "text", "text": f"{REREAD_HEADER}{path}\n{files[path]}"}
        assert records[path]["tokens"] == round(len(json.dumps(block, separators=(",", ":"))) / 4)
    assert (
        ctx.details["reread_tokens"]
        == records["notes.md"]["tokens"] + records["src/parser.py"]["tokens"]
    )
    assert records["data/big.csv"]["why"] == "over 1,000 tokens"
    assert "outside the workspace" in records["../secret.txt"]["why"]
    assert "outside the workspace" in records["link.txt"]["why"]
    assert "binary" in records["image.bin"]["why"]
    # The same file just under and just over the limit.
    small = records["src/parser.py"]["tokens"]
    for limit, whole in ((small, True), (small - 1, False)):
        result, ctx = compact(
            Summarise(reread_files=1, reread_max_tokens=limit),
            conversation(),
            recent_files=["src/parser.py"],
            read_file=lambda path, most: read_text(workspace, path, most),
        )
        assert (len(result[0]["content"]) == 2) is whole
        assert ctx.details["reread_files"][0]["whole"] is whole


def test_without_a_workspace_files_are_listed_by_path():
    result, ctx = compact(Summarise(reread_files=2), conversation(), recent_files=["a.py", "b.py"])
    assert len(result[0]["content"]) == 1
    assert f"{FILES_HEADER}\n- a.py\n- b.py" in texts(result[0])[0]
    assert all(not r["whole"] and "no workspace" in r["why"] for r in ctx.details["reread_files"])


def test_a_session_keeps_prompts_and_files_through_the_real_sdk(workspace: Path):
    """Through the loop, the SDK and the fake: the compaction keeps the newest prompts and puts
    the recent files back, the fake accepts every request, and the transcript records what was
    kept."""
    strategies = [
        MicroCompact(),
        Summarise(keep_user_tokens=200, reread_files=3, reread_max_tokens=1_000),
    ]
    asks = ["Survey the project.", "Look at the notes again.", "Check the CSV once more."]
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        session = Session(
            workspace,
            model=model,
            policy=CompactPolicy(context_limit=12_000),
            strategies=strategies,
        )
        events: list[Any] = []
        session.subscribe(events.append)
        for ask in asks:
            session.ask(ask)
        server.assert_no_rejections()
    done = [e for e in events if isinstance(e, CompactionFinished) and e.success]
    assert done
    last = done[-1]
    reread = last.details["reread_files"]
    # The offline model read the README, the module and the CSV (about 2,100 tokens).
    assert {r["path"]: r["whole"] for r in reread} == {
        "samples.csv": False,
        "inventory.py": True,
        "README.md": True,
    }
    assert all(r["whole"] == (r["tokens"] <= 1_000) for r in reread if r["tokens"] is not None)
    history = json.dumps(session.messages)
    for record in reread:
        if record["whole"]:
            on_disk = (workspace / record["path"]).read_text()
            assert json.dumps(f"{REREAD_HEADER}{record['path']}\n{on_disk}")[1:-1] in history
    assert last.details["kept_prompts"] >= 1
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    recorded = [r for r in records if r["kind"] == "compaction" and r["success"]]
    assert recorded[-1]["details"] == last.details


def test_a_key_in_a_file_read_again_is_redacted(workspace: Path):
    """A file put back after the summary is redacted as a tool result is: the key the session
    knows reaches neither a request nor the transcript."""
    key = "sk-ant-api03-REREAD-" + "Kp4" * 10
    (workspace / "settings.env").write_text(f"API_KEY={key}\nMODE=test\n")
    with FakeAnthropic() as server:
        server.queue(
            reply(tool_use("read_file", {"path": "settings.env"}, id="toolu_read")),
            reply(text("Read it.")),
            reply(text("SUMMARY")),
            reply(text("Carrying on.")),
        )
        model = AnthropicModel(api_key=key, base_url=server.url, max_retries=0)
        session = Session(workspace, model=model, strategies=[Summarise(reread_files=1)])
        session.ask("Read the settings.")
        done = session.compact()
        session.ask("Carry on.")
        server.assert_no_rejections()
        sent = json.dumps(server.accepted)
    session.close()
    assert done.success and done.details["reread_files"][0]["whole"]
    put_back = json.dumps(session.messages)
    assert "MODE=test" in put_back and "[redacted]" in put_back
    assert key not in put_back and key not in sent
    assert all(key not in p.read_text() for p in session.directory.rglob("*") if p.is_file())


def test_the_options_by_name_and_checked():
    spec = "summarise(keep_user_tokens=20000, reread_files=5, reread_max_tokens=5000)"
    made = make_strategy(spec)
    assert (made.keep_user_tokens, made.reread_files, made.reread_max_tokens) == (20_000, 5, 5_000)
    assert make_strategy("observation-masking(keep_turns=10, cache_aware=True)").cache_aware
    assert make_strategy("clear-tool-uses(keep=3, cache_aware=True)").cache_aware
    for bad in ({"keep_user_tokens": -1}, {"reread_files": 1.5}, {"reread_max_tokens": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Summarise(**bad)
