"""The offline model: a deterministic, scripted stand-in for Claude that needs no key.

It is not intelligent and says so in everything it writes ("[offline model]"). It exists so that
the quick start, the example notebooks and the tests drive the real machinery: it calls real
tools (several in one response), reads what they returned, writes and edits a file, can ask for
compaction itself, and when asked for a summary builds one from the conversation it was given.

Its script, per user request (each response is one step):

1. list the workspace (two bash calls in one response);
2. read up to three text files it found (parallel read_file calls);
3. count lines and grep for definitions and TODOs (two bash calls) - plus a `compact` call when
   the request mentions compaction;
4. write `notes/offline-notes.md` from what it saw;
5. edit that file (a unique-match edit);
6. answer in text and stop.

Asked a retention probe (`evo_magic.probe`), it answers from what its context holds, by the
probe module's keyword search (those answers carry no label: a grader reads them).

A request written as directives (``Run `cmd`.``, ``Write to `PATH` the line `TEXT`.``, ...;
see `offline_tasks`) is worked through them instead, one step each: how the built-in
experiment tasks drive it, so that what it does depends on what its context still holds.

Progress is read from the history (the "Step k/6" line of its own messages, or the progress line
of a summary), so the script carries on across a compaction.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from evo_magic.compacted import (
    COMPACTED_HEADER,
    FILES_HEADER,
    REMINDER_PREFIX,
    REQUEST_HEADER,
    is_pin_text,
)
from evo_magic.measure import estimate_tokens, to_json
from evo_magic.models.base import ModelReply, ModelRequest, TextCallback
from evo_magic.models.offline_tasks import Directive, directive_step, directives
from evo_magic.probe import answer_from_context, probe_question
from evo_magic.usage import Usage

LABEL = "[offline model]"
STEPS = 6
NOTES_PATH = "notes/offline-notes.md"
TEXT_SUFFIXES = (".py", ".md", ".txt", ".csv", ".json", ".toml", ".cfg", ".ini", ".yaml", ".yml")
_STEP = re.compile(r"Step (\d+)/(\d+)")
_PROGRESS = re.compile(r"Offline script progress: step (\d+) of \d+")


class OfflineModel:
    """See the module docstring. Deterministic: the same conversation gets the same answer
    (its tool_use ids aside, which carry a tag of the instance)."""

    name = "offline"
    offline = True

    def __init__(self) -> None:
        self._calls = 0
        # Its tool_use ids end with a tag of this instance: a session switched back to the
        # stand-in gets a new one, whose call count starts again, and must not repeat an id
        # the session used before a compaction (the history no longer shows those).
        self._tag = uuid.uuid4().hex[:8]

    def respond(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelReply:
        self._calls += 1
        tools_allowed = (request.tool_choice or {}).get("type") != "none"
        question = probe_question(request.messages)
        if question is not None:  # a retention probe: answered from what the context holds
            content = [{"type": "text", "text": answer_from_context(request.messages, question)}]
        elif request.tools and tools_allowed:
            content = self._agent_step(request.messages)
        elif request.tools:  # asked in the conversation: the last text is the instructions
            conversation, instructions = _split_instructions(request.messages)
            content = [_text(summarise(conversation, instructions))]
        else:
            content = [_text(summarise(request.messages))]
        content = _unique_ids(content, request.messages, self._calls, self._tag)
        for block in content:
            if block["type"] == "text" and on_text is not None:
                for piece in re.findall(r"\S+\s*", block["text"]):
                    on_text(piece)
        has_tools = any(block["type"] == "tool_use" for block in content)
        usage = Usage(
            input_tokens=estimate_tokens(request.measured_chars()),
            output_tokens=estimate_tokens(len(to_json(content))),
        )
        return ModelReply(content, "tool_use" if has_tools else "end_turn", usage, self.name)

    def _agent_step(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        task, done, later = _task_and_progress(messages)
        if steps := directives(task):  # a request written as directives (offline_tasks)
            return _directed(steps, done, messages, len(messages) - len(later) - 1)
        files = _found_files(later) or _listed_files(messages)
        step = done + 1
        plan: dict[int, Callable[[str, list[dict[str, Any]]], list[dict[str, Any]]]] = {
            1: _step_list,
            2: _step_read,
            3: _step_inspect,
            4: _step_write,
            5: _step_edit,
        }
        if step in plan:
            return plan[step](task, later, files)
        return [_text(_final_answer(task, later, files))]


def _directed(
    steps: list[Directive], done: int, messages: list[dict[str, Any]], request_index: int
) -> list[dict[str, Any]]:
    """The next step of a request written as directives, then the answer."""
    total = len(steps) + 1
    if done >= len(steps):
        return [_text(f"Step {total}/{total}: done, every step of the request was taken.")]
    said, calls = directive_step(steps[done], messages, request_index, _tool)
    return [_text(f"Step {done + 1}/{total}: {said}"), *calls]


# -- reading the conversation -------------------------------------------------------------------


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if b.get("type") == "text"]


def _task_and_progress(
    messages: list[dict[str, Any]],
) -> tuple[str, int, list[dict[str, Any]]]:
    """The request being worked on, the last script step done, and the messages after it."""
    start = 0
    task = ""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        notes = ("[Your previous", REMINDER_PREFIX)  # the session's notes, not requests
        texts = [
            t
            for t in _texts(message)
            if t.strip() and not t.startswith(notes) and not is_pin_text(t)
        ]
        if message["role"] == "user" and texts:
            start, task = index, texts[-1]
            break
    done = 0
    if task.startswith(f"{REQUEST_HEADER}\n"):
        # A compaction that kept more than its summary carries the request on its own after
        # it: the progress is in the summary before.
        task = task.removeprefix(f"{REQUEST_HEADER}\n")
        summary = next(
            (t for m in messages[start::-1] for t in _texts(m) if t.startswith(COMPACTED_HEADER)),
            "",
        )
        progress = _PROGRESS.search(summary)
        done = int(progress.group(1)) if progress else 0
    elif task.startswith(COMPACTED_HEADER):
        progress = _PROGRESS.search(task)
        done = int(progress.group(1)) if progress else 0
        task = task.split(REQUEST_HEADER, 1)[1].strip() if REQUEST_HEADER in task else task
    later = messages[start + 1 :]
    for message in later:
        if message["role"] == "assistant":
            for text in _texts(message):
                if found := _STEP.search(text):
                    done = int(found.group(1))
    return task, done, later


def _results(later: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(tool_use input, result text) pairs seen since the request, oldest first."""
    inputs = {
        b["id"]: b
        for m in later
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    }
    pairs = []
    for message in later:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result" and block.get("tool_use_id") in inputs:
                content = block.get("content", "")
                if not isinstance(content, str):
                    content = "".join(part.get("text", "") for part in content)
                pairs.append((inputs[block["tool_use_id"]], content))
    return pairs


def _found_files(later: list[dict[str, Any]]) -> list[str]:
    """Text files listed by step 1's `find`, in order, at most three."""
    for tool, output in _results(later):
        if tool["name"] == "bash" and tool["input"].get("command", "").startswith("find"):
            files = [line.strip().removeprefix("./") for line in output.splitlines()]
            return [f for f in files if f.endswith(TEXT_SUFFIXES) and f != NOTES_PATH][:3]
    return []


def _listed_files(messages: list[dict[str, Any]]) -> list[str]:
    """After a compaction: the text files named under "Recent files to reopen"."""
    text = "\n".join(_texts(messages[0])) if messages else ""
    if FILES_HEADER not in text:
        return []
    listed = text.split(FILES_HEADER, 1)[1].split("\n\n", 1)[0]
    files = [line[2:].strip() for line in listed.splitlines() if line.startswith("- ")]
    return [f for f in files if f.endswith(TEXT_SUFFIXES) and f != NOTES_PATH][:3]


# -- the script ----------------------------------------------------------------------------------


def _step_list(task: str, later: list[dict[str, Any]], files: list[str]) -> list[dict[str, Any]]:
    return [
        _text(f"Step 1/{STEPS}: looking around the workspace for: {_short(task, 80)}"),
        _tool("bash", command="ls -la"),
        _tool(
            "bash",
            command="find . -maxdepth 2 -type f -not -path './.*' -not -path './notes/*' | sort",
        ),
    ]


def _step_read(task: str, later: list[dict[str, Any]], files: list[str]) -> list[dict[str, Any]]:
    if not files:
        return [_text(f"Step 2/{STEPS}: no text files to read."), _tool("bash", command="pwd")]
    calls = [_tool("read_file", path=path) for path in files]
    return [_text(f"Step 2/{STEPS}: reading {', '.join(files)}."), *calls]


def _step_inspect(task: str, later: list[dict[str, Any]], files: list[str]) -> list[dict[str, Any]]:
    names = " ".join(files) or "/dev/null"
    blocks = [
        _text(f"Step 3/{STEPS}: counting lines and looking for definitions and TODOs."),
        _tool("bash", command=f"wc -l {names}"),
        _tool("bash", command=f"grep -n -E 'def |class |TODO' {names} | head -40"),
    ]
    if "compact" in task.lower():
        blocks.append(_tool("compact", focus=f"the request: {_short(task, 120)}"))
    return blocks


def _step_write(task: str, later: list[dict[str, Any]], files: list[str]) -> list[dict[str, Any]]:
    lines = [
        "# Notes of the offline model",
        "",
        f"Request: {_short(task, 200)}",
        "",
        "Status: draft",
    ]
    for tool, output in _results(later):
        if tool["name"] == "bash" and tool["input"].get("command", "").startswith(("wc", "grep")):
            lines += ["", f"$ {tool['input']['command']}", *output.splitlines()[:20]]
    content = "\n".join(lines) + "\n"
    return [
        _text(f"Step 4/{STEPS}: writing what I saw to {NOTES_PATH}."),
        _tool("write_file", path=NOTES_PATH, content=content),
    ]


def _step_edit(task: str, later: list[dict[str, Any]], files: list[str]) -> list[dict[str, Any]]:
    return [
        _text(f"Step 5/{STEPS}: marking the notes as reviewed."),
        _tool("edit_file", path=NOTES_PATH, old_str="Status: draft", new_str="Status: reviewed"),
    ]


def _final_answer(task: str, later: list[dict[str, Any]], files: list[str]) -> str:
    pairs = _results(later)
    errors = sum(1 for _, output in pairs if output.startswith(("Error", "[error")))
    return (
        f"Step {STEPS}/{STEPS}: done. I am a scripted stand-in, not Claude: I listed the "
        f"workspace, read {len(files)} file(s) ({', '.join(files) or 'none'}), counted lines, "
        f"wrote and edited {NOTES_PATH}. {len(pairs)} tool results in this request"
        f"{f', {errors} of them errors' if errors else ''}. Request was: {_short(task, 160)}"
    )


# -- summaries -----------------------------------------------------------------------------------


def _split_instructions(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The conversation of an in-context summary request, and the instructions that end it."""
    last = messages[-1]
    blocks = last["content"] if isinstance(last["content"], list) else []
    if not blocks or blocks[-1].get("type") != "text":
        return messages, ""
    rest = [*messages[:-1], {**last, "content": blocks[:-1]}] if blocks[:-1] else messages[:-1]
    return rest, blocks[-1]["text"]


def summarise(messages: list[dict[str, Any]], instructions: str = "") -> str:
    """A summary built from the conversation text of a summarisation request (or from the
    conversation itself, followed by `instructions`, when it was asked in context)."""
    prompt = "\n".join([*(t for m in messages for t in _texts(m)), instructions])
    focus = re.search(r"preserve, above all: (.*)", prompt)
    if "<conversation>" in prompt:  # the conversation as text, one message a line
        conversation = prompt.split("<conversation>", 1)[-1]
        records = []
        for line in conversation.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line cut by the head/tail limit
    else:  # asked in the conversation itself: the messages are the conversation
        records = list(messages)
        conversation = "\n".join(to_json(m) for m in records)
    user_texts = [t for r in records if r.get("role") == "user" for t in _texts(r) if t.strip()]
    goal = user_texts[0] if user_texts else "(not visible)"
    if goal.startswith(COMPACTED_HEADER):
        goal = _goal_line(goal) or goal
    latest = user_texts[-1] if user_texts else goal
    if latest.startswith(COMPACTED_HEADER) and REQUEST_HEADER in latest:
        latest = latest.split(REQUEST_HEADER, 1)[1].strip()
    tools = re.findall(r'"type":"tool_use","id":"[^"]+","name":"(\w+)"', conversation)
    paths = list(dict.fromkeys(re.findall(r'"path":"([^"]+)"', conversation)))
    found = [(int(k), int(n)) for k, n in _STEP.findall(conversation)] or [(0, STEPS)]
    steps, total = [k for k, _ in found], found[-1][1]
    counts = ", ".join(f"{name} x{tools.count(name)}" for name in dict.fromkeys(tools))
    return "\n".join(
        [
            f"{LABEL} Summary (scripted stand-in, built from the conversation text):",
            f"Goal: {_short(goal, 300)}",
            f"Latest request: {_short(latest, 300)}",
            f"Findings and decisions: {len(tools)} tool calls ({counts or 'none'}).",
            f"Files read or changed: {', '.join(paths) or 'none'}",
            f"Remaining work: {_remaining(steps[-1], total)}",
            f"User constraints and preferences: {focus.group(1) if focus else 'none stated'}",
            f"Offline script progress: step {steps[-1]} of {total}",
        ]
    )


def _remaining(done: int, total: int) -> str:
    if done >= total:
        return f"none: all {total} steps of the script are done."
    return f"continue the request from step {done + 1} of {total}."


def _goal_line(text: str) -> str | None:
    found = re.search(r"^Goal: (.*)$", text, re.MULTILINE)
    return found.group(1) if found else None


# -- blocks --------------------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text if text.startswith(LABEL) else f"{LABEL} {text}"}


def _tool(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "", "name": name, "input": tool_input}


def _unique_ids(
    content: list[dict[str, Any]], messages: list[dict[str, Any]], call: int, tag: str
) -> list[dict[str, Any]]:
    """Give tool_use blocks ids that no earlier block in the conversation has."""
    taken = set(re.findall(r'"id":"(toolu_[^"]+)"', to_json(messages)))
    number = 0
    for block in content:
        if block["type"] != "tool_use":
            continue
        while True:
            number += 1
            candidate = f"toolu_offline_{call:04d}_{number:02d}_{tag}"
            if candidate not in taken:
                break
        block["id"] = candidate
    return content


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
