"""Session: one conversation with an agent, as long as a kernel (or a script) keeps it.

It owns the message history, the system prompt, the workspace, the tools, the compaction policy
and state, and the transcript. `ask(text)` runs the agent loop; `compact(focus)` compacts on
demand. Front-ends observe the session's events; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.compact.measure import TokenAnchor, measure
from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    ContextSize,
    Event,
    MessageAppended,
    ModelCalled,
    TextDelta,
    ToolStarted,
)
from evo_magic.models import Model, resolve_model
from evo_magic.state import CompactState, Usage
from evo_magic.tools import Tool, default_tools
from evo_magic.transcript import Transcript

Observer = Callable[[Event], None]

DEFAULT_SYSTEM = """\
You are a careful coding agent working inside a researcher's notebook session.
Your workspace is a directory; file paths are relative to it. Use the tools to look before you \
change anything, keep tool outputs small (head, grep, offset/limit), and say what you found.
When the context grows long, or before switching to a new part of the task, call `compact` with \
a focus that names what must survive."""

# Events that are only for live display: the transcript has their content in other records.
_NOT_RECORDED = (TextDelta, ToolStarted, ModelCalled)


@dataclass
class AskResult:
    """What one `ask` did: the final text, why it stopped, and every event it emitted."""

    text: str
    stop_reason: str
    """"end_turn", "max_turns", "max_tokens", "stop_sequence", "refusal", ... as the loop saw it."""
    turns: int
    usage: Usage
    duration: float
    context: ContextSize
    events: list[Event] = field(default_factory=list)

    @property
    def compactions(self) -> list[CompactionFinished]:
        return [e for e in self.events if isinstance(e, CompactionFinished)]


class Session:
    """A conversation with an agent in a workspace. See the module docstring."""

    def __init__(
        self,
        workspace: str | Path = ".",
        *,
        model: Model | str | None = None,
        system: str | None = None,
        policy: CompactPolicy | None = None,
        max_turns: int = 30,
        max_tokens: int = 8_192,
        transcripts_root: str | Path | None = None,
        session_id: str | None = None,
        tools: list[Tool] | None = None,
        bash_timeout: float = 120.0,
    ):
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"workspace {self.workspace} is not a directory")
        self.model: Model = resolve_model(model)
        self.system = DEFAULT_SYSTEM if system is None else system
        self._policy = policy or CompactPolicy()
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.tools = list(tools) if tools is not None else default_tools()
        self.bash_timeout = bash_timeout
        root = Path(transcripts_root) if transcripts_root else self.workspace / ".evo_magic"
        self.transcript = Transcript(root.expanduser(), session_id)
        self.messages: list[dict[str, Any]] = []
        self.state = CompactState()
        self.usage = Usage()
        self.asks = 0
        self.calls = 0
        self.token_anchor: TokenAnchor | None = None
        self.active_request: str | None = None
        self._observers: list[Observer] = []
        self._record_start()

    @property
    def policy(self) -> CompactPolicy:
        """The compaction settings; assigning a new policy applies from the next model call."""
        return self._policy

    @policy.setter
    def policy(self, policy: CompactPolicy) -> None:
        if not isinstance(policy, CompactPolicy):
            raise TypeError(f"policy must be a CompactPolicy, got {type(policy).__name__}")
        if policy != self._policy:
            self._policy = policy
            self.transcript.write("policy", {"policy": _policy_record(policy)})

    @property
    def session_id(self) -> str:
        return self.transcript.session_id

    @property
    def directory(self) -> Path:
        """The session's own directory under the transcripts root."""
        return self.transcript.directory

    def __repr__(self) -> str:
        size = self.context()
        return (
            f"<Session {self.session_id} model={self.model.name!r} messages={size.messages} "
            f"chars={size.chars} compactions={self.state.compact_count}>"
        )

    # -- observing -------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event; returns a function that unsubscribes."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def emit(self, event: Event) -> None:
        """Record the event in the transcript, then pass it to every observer."""
        if not isinstance(event, _NOT_RECORDED):
            record = event.as_record()
            self.transcript.write(record.pop("kind"), record)
        for observer in list(self._observers):
            observer(event)

    # -- the history -----------------------------------------------------------------------

    def context(self) -> ContextSize:
        """The current size of the history (characters, and tokens anchored on the last call)."""
        return measure(self.messages, self.token_anchor)

    def append(self, message: dict[str, Any]) -> None:
        """Add a message to the history, merging a user message into a trailing user message
        (an interrupted or failed turn leaves one) so roles keep alternating."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == message["role"] == "user":
            last["content"] = _blocks(last["content"]) + _blocks(message["content"])
        else:
            self.messages.append(message)
        index = len(self.messages) - 1
        self.emit(MessageAppended(index, self.messages[index], self.asks, self.state.compact_count))

    def replace_history(self, messages: list[dict[str, Any]]) -> None:
        """Swap in a new history (after a compaction); the token anchor no longer applies."""
        self.messages = messages
        self.token_anchor = None
        for index, message in enumerate(messages):
            self.emit(MessageAppended(index, message, self.asks, self.state.compact_count))

    # -- what users call -------------------------------------------------------------------

    def ask(self, text: str) -> AskResult:
        """Send `text` as the user's next message and run the agent loop until the model stops
        asking for tools or `max_turns` model calls were made.

        Raises ModelError when a model call fails for good, and re-raises KeyboardInterrupt; in
        both cases the history stays valid and the next `ask` continues the conversation.
        """
        from evo_magic.loop import run_ask

        if not isinstance(text, str) or not text.strip():
            raise ValueError("ask() needs a non-empty request")
        events: list[Event] = []
        unsubscribe = self.subscribe(events.append)
        try:
            finished = run_ask(self, text)
        finally:
            unsubscribe()
        return _result(finished, events)

    def compact(self, focus: str | None = None) -> CompactionFinished:
        """Compact the whole history now (as the `compact` tool would), keeping `focus`.

        Returns the compaction event; on failure (`success` False, `error` says why) the history
        is exactly as it was.
        """
        from evo_magic.compact.history import compact_history

        return compact_history(self, trigger="user", focus=focus or None)

    def reset(self) -> None:
        """Start afresh: empty history and compaction state, same transcript and settings."""
        self.messages = []
        self.state = CompactState()
        self.token_anchor = None
        self.transcript.write("reset", {})

    def close(self) -> None:
        """Flush and close the transcript (also done at interpreter exit)."""
        self.transcript.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _record_start(self) -> None:
        self.transcript.write(
            "session_start",
            {
                "model": self.model.name,
                "offline": self.model.offline,
                "workspace": str(self.workspace),
                "system": self.system,
                "tools": [tool.name for tool in self.tools],
                "policy": _policy_record(self.policy),
                "max_turns": self.max_turns,
            },
        )


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _policy_record(policy: CompactPolicy) -> dict[str, Any]:
    record = dict(vars(policy))
    record["exclude_tools"] = sorted(policy.exclude_tools)
    return record


def _result(finished: AskFinished, events: list[Event]) -> AskResult:
    return AskResult(
        text=finished.text,
        stop_reason=finished.stop_reason,
        turns=finished.turns,
        usage=finished.usage,
        duration=finished.duration,
        context=finished.context,
        events=events,
    )
