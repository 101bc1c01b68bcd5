"""Facts: what retention follows through a conversation, given or extracted without a model.

Extraction rules (deterministic, per conversation, on what the session recorded):

- `instruction` (origin "user"): from the prompts a person typed (the text blocks of user
  messages of `message_kind` "prompt", or "tool_result" where a prompt joined the results
  before it; text wrapped whole in a tag, such as an IDE note or a system reminder, is not
  typed), each
  sentence or line of 12 to 400 characters, not a question, that holds a constraint or a
  preference: must, mustn't, never, always, make sure, ensure, avoid, should, shouldn't,
  prefer, instead of, no more than, at most, at least, I want, I don't want, I'd like, not
  allowed anywhere; don't / do not, only, keep, remember, use, leave, stick to where a clause
  starts (the sentence's start, after a comma, "and", "but", "please", "so"). The fact is the
  sentence as typed (matched verbatim, case-sensitive).
- `path` (origin "assistant"): files the agent read, wrote or edited, from the tool inputs: the
  `file_path`, `path`, `notebook_path` or `filename` of a tool whose name says it reads,
  writes, edits, views or creates; the files of an `apply_patch` input (`*** Add/Update/Delete
  File: ...`); and the file arguments of `cat`, `head`, `tail`, `sed -n`, `nl`, `less` and `wc`
  in a shell command (bash `command`, Codex `cmd`). A file argument has an extension or a `/`.
- `error` (origin "tool_result"): lines of tool results that are an exception's last line
  (`SomethingError: ...`, `...Exception: ...`), hold `error:` or `ERROR` or `fatal:`, or start
  with `FAILED`; the first line of a result marked as an error. At most 300 characters.
- `identifier` (origin "tool_result"): lines of tool results (the code the agent read, listed
  or searched) that define a name: `def name`, `class name`, `function name`, `fn name`,
  `func name`. The fact is the definition line (from its keyword on), the name its answer.

Each distinct text is one fact per conversation, in order of first appearance. Every fact has a
cloze (its text with one salient token blanked; the token is the answer) unless given a question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.probe import BLANK, TOKEN, block_text, cloze_question, normalise

KINDS = ("instruction", "path", "error", "identifier", "custom")
TYPED = frozenset({"prompt", "tool_result"})
"""Kinds of user message whose text a person typed: a prompt, or (rebuilt as one API message
with the results before it) a prompt sent after tool results."""

_CONSTRAINT = re.compile(
    r"\b(must|mustn't|never|always|make sure|ensure|avoid|should|shouldn't|prefer|instead of|"
    r"no more than|at most|at least|i want|i don't want|i'd like|i would like|not allowed)\b",
    re.IGNORECASE,
)
_IMPERATIVE = re.compile(
    r"(?:^|[,;:]\s*|\b(?:and|but|please|so)\s+)(?:don't|do not|dont|only|keep|remember|use|"
    r"leave|stick to)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WRAPPED = re.compile(r"^\s*<([\w-]+)[^>]*>.*</\1>\s*$", re.DOTALL)
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename")
_FILE_TOOL = re.compile(r"read|write|edit|view|create|notebook|str_replace", re.IGNORECASE)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_READERS = frozenset({"cat", "head", "tail", "sed", "nl", "less", "wc"})
_SHELL_SPLIT = re.compile(r"[;&|]+|\n")
_FILE_ARG = re.compile(r"^[\w./~-]+$")
_ERROR_CASED = re.compile(r"^[\w.]*(?:Error|Exception)(?::|$)|^FAILED\b|\bERROR\b")
_DEFINITION = re.compile(r"\b(?:async\s+def|def|class|function|fn|func)\s+([A-Za-z_]\w*)")
_STOP = frozenset(
    [
        "the",
        "this",
        "that",
        "these",
        "those",
        "with",
        "from",
        "into",
        "onto",
        "have",
        "has",
        "had",
        "will",
        "would",
        "could",
        "should",
        "must",
        "always",
        "never",
        "only",
        "make",
        "sure",
        "avoid",
        "dont",
        "don't",
        "not",
        "about",
        "them",
        "they",
        "their",
        "there",
        "then",
        "than",
        "what",
        "when",
        "where",
        "which",
        "while",
        "your",
        "yours",
        "please",
        "just",
        "also",
        "like",
        "want",
        "need",
        "keep",
        "remember",
        "know",
        "file",
        "files",
        "code",
        "line",
        "lines",
        "test",
        "tests",
        "true",
        "false",
        "none",
        "null",
        "self",
        "return",
        "import",
    ]
)
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class Fact:
    """A fact to follow: `text` as it appears in the conversation. `question` and `answer`
    make a probe of it (by default a cloze of `text`, with `answer` or a salient token
    blanked)."""

    text: str
    kind: str = "custom"
    question: str | None = None
    answer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a Fact needs a non-empty text")
        if self.kind not in KINDS:
            raise ValueError(f"unknown fact kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.question is not None and not self.answer:
            raise ValueError(f"the Fact {self.text!r} has a question but no answer")


@dataclass
class Tracked:
    """A fact of one conversation, as retention follows it."""

    session_id: str
    fact_id: str
    kind: str
    text: str
    origin: str
    question: str | None
    answer: str | None
    needle: str = ""
    """What is searched for: the text itself for instructions, else whitespace-normalised."""
    verbatim: bool = False
    first_call: int | None = None
    tool_use_ids: set[str] = field(default_factory=set)
    """The tool calls whose blocks hold it (where a strategy's change can remove it)."""

    def __post_init__(self) -> None:
        self.verbatim = self.kind == "instruction"
        self.needle = self.text if self.verbatim else normalise(self.text)


def tracked(session_id: str, given: Iterable[Fact]) -> list[Tracked]:
    """Given facts for one conversation, in the given order (duplicates once)."""
    out: dict[str, Tracked] = {}
    for fact in given:
        probe = _probe(fact.text, fact.kind, fact.question, fact.answer)
        key = fact.text
        if key not in out:
            fact_id = f"{fact.kind}-{len(out) + 1}"
            out[key] = Tracked(session_id, fact_id, fact.kind, fact.text, "given", *probe)
    return list(out.values())


def as_fact(value: Fact | str) -> Fact:
    if isinstance(value, Fact):
        return value
    if isinstance(value, str):
        return Fact(value)
    raise TypeError(f"facts are str or Fact, not {type(value).__name__}")


# -- extraction --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """One extracted fact before it is numbered."""

    kind: str
    text: str
    origin: str
    answer: str | None = None


RecordedMessage = tuple[str, str | None, list[dict[str, Any]]]
"""(role, message_kind, content) of a recorded message."""


def extract(session_id: str, messages: Iterable[RecordedMessage]) -> list[Tracked]:
    """The facts of one conversation from its messages, given as (role, message_kind, content)
    in order (see the module docstring for the rules)."""
    seen: dict[tuple[str, str], Tracked] = {}
    counts: dict[str, int] = {}
    for found in _found(messages):
        key = (found.kind, found.text)
        if key in seen:
            continue
        counts[found.kind] = counts.get(found.kind, 0) + 1
        probe = _probe(found.text, found.kind, None, found.answer)
        fact_id = f"{found.kind}-{counts[found.kind]}"
        seen[key] = Tracked(session_id, fact_id, found.kind, found.text, found.origin, *probe)
    return list(seen.values())


def _found(messages: Iterable[RecordedMessage]) -> Iterator[Found]:
    tools: dict[str, dict[str, Any]] = {}
    for role, kind, content in messages:
        for block in content:
            match block.get("type"):
                case "text" if role == "user" and kind in TYPED:
                    yield from instructions(str(block.get("text") or ""))
                case "tool_use":
                    tools[str(block.get("id"))] = block
                    yield from paths(str(block.get("name") or ""), block.get("input"))
                case "tool_result":
                    text = block_text(block)
                    yield from errors(text, bool(block.get("is_error")))
                    yield from identifiers(text)


def instructions(prompt: str) -> Iterator[Found]:
    """Constraint and preference sentences of a typed prompt."""
    if _WRAPPED.match(prompt):
        return
    for sentence in _SENTENCE_END.split(prompt):
        sentence = sentence.strip()
        if not 12 <= len(sentence) <= 400 or sentence.endswith("?"):
            continue  # a question asks, it does not constrain
        if _CONSTRAINT.search(sentence) or _IMPERATIVE.search(sentence):
            yield Found("instruction", sentence, "user")


def paths(tool: str, tool_input: Any) -> Iterator[Found]:
    """Files a tool call read, wrote or edited."""
    for name in _files(tool, tool_input):
        yield Found("path", name, "assistant")


def _files(tool: str, tool_input: Any) -> Iterator[str]:
    """The files of a tool input: a patch given whole; else the path arguments of a file tool,
    the files of a patch in any argument, and those a shell command reads."""
    if isinstance(tool_input, str):
        yield from _patched(tool_input)
    if not isinstance(tool_input, dict):
        return
    if _FILE_TOOL.search(tool):
        yield from _path_arguments(tool_input)
    for value in tool_input.values():
        if isinstance(value, str) and "*** " in value:
            yield from _patched(value)
    command = _command(tool_input)
    if command is not None:
        yield from _shell_files(command)


def _path_arguments(tool_input: dict[str, Any]) -> Iterator[str]:
    """The files a file tool names (`file_path`, `path`, ...)."""
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and _looks_like_file(value):
            yield value


def _command(tool_input: dict[str, Any]) -> str | None:
    """The shell command of a tool input (bash `command`, Codex `cmd`, a list joined)."""
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    return command if isinstance(command, str) else None


def _patched(text: str) -> Iterator[str]:
    """The files an `apply_patch` text adds, updates or deletes."""
    return (name.strip() for name in _PATCH_FILE.findall(text))


def _shell_files(command: str) -> Iterator[str]:
    for part in _SHELL_SPLIT.split(command):
        words = part.split()
        if words and words[0] == "bash" and "-lc" in words:
            continue  # a wrapped command: its inner text is split on the separators too
        if not words or words[0] not in _READERS:
            continue
        for word in words[1:]:
            word = word.strip("'\"")
            if not word.startswith("-") and _looks_like_file(word) and _FILE_ARG.match(word):
                yield word


def _looks_like_file(value: str) -> bool:
    name = value.rstrip("/").rsplit("/", 1)[-1]
    return bool(name) and len(value) <= 300 and ("." in name[1:] or "/" in value)


def errors(text: str, is_error: bool) -> Iterator[Found]:
    """Error lines of a tool result."""
    lines = [line.strip() for line in text.splitlines()]
    for number, line in enumerate(lines):
        if not line:
            continue
        first_of_error = is_error and number == next(i for i, x in enumerate(lines) if x)
        if first_of_error or _is_error_line(line):
            yield Found("error", line[:MAX_ERROR_CHARS], "tool_result")


def _is_error_line(line: str) -> bool:
    if _ERROR_CASED.search(line):
        return True
    return bool(re.search(r"\berror:|^fatal:", line, re.IGNORECASE))


def identifiers(text: str) -> Iterator[Found]:
    """Definition lines in a tool result."""
    if "def" not in text and "class" not in text and "func" not in text and "fn " not in text:
        return
    for line in text.splitlines():
        found = _DEFINITION.search(line)
        if found:
            definition = line[found.start() :].strip()[:200]
            yield Found("identifier", definition, "tool_result", answer=found.group(1))


# -- probes ------------------------------------------------------------------------------------


def _probe(
    text: str, kind: str, question: str | None, answer: str | None
) -> tuple[str | None, str | None]:
    """(question, answer): the given ones, else a cloze of `text` (None when no token fits)."""
    if question is not None:
        return question, answer
    spans = [(m.start(), m.end()) for m in re.finditer(TOKEN, text)]
    if not spans:
        return None, None
    chosen = None
    if answer:
        chosen = next((s for s in spans if text[s[0] : s[1]] == answer), None)
    if chosen is None:
        chosen = _salient(text, spans, kind)
    if chosen is None:
        return None, None
    start, end = chosen
    cloze = text[:start] + BLANK + text[end:]
    return cloze_question(cloze), text[start:end]


def _salient(text: str, spans: Sequence[tuple[int, int]], kind: str) -> tuple[int, int] | None:
    """The token a cloze blanks: for a path its file name, else the most distinctive token
    (with digits, capitals, '_' or '-', then the longest), never a common word."""
    if kind == "path":
        return spans[-1]
    scored = []
    for start, end in spans:
        token = text[start:end]
        if len(token) < 3 or token.lower() in _STOP:
            continue
        marked = any(c.isdigit() or c in "_-" for c in token) or any(c.isupper() for c in token[1:])
        scored.append((marked, len(token), -start, (start, end)))
    return max(scored)[3] if scored else None
