"""What a live session gives its compactor and its pins (`CompactionServices`): summaries by the
session's model, priced by its ledger and redacted; the API's own summary and the preview of a
server strategy; workspace files read as the file tools read them; saved outputs and snapshots
in the session's transcript folder. Replay gives the same compactor its own services."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evo_magic.compact import server
from evo_magic.compact.base import Strategy
from evo_magic.compact.preview import Preview
from evo_magic.compact.services import CompactionServices
from evo_magic.compact.state import CompactState
from evo_magic.cost import Ledger
from evo_magic.events import Event, Notice
from evo_magic.history import History
from evo_magic.messages import Message
from evo_magic.models import Model, ModelRequest
from evo_magic.settings import SessionSettings
from evo_magic.summariser import AgentPrompt, Summariser, Summary
from evo_magic.tools import Tool, ToolContext
from evo_magic.tools.files import read_text
from evo_magic.tools.recall import block_text
from evo_magic.transcript import Transcript, output_shown, outputs_shown

PIN_FILE_MAX_CHARS = 100_000
"""A pinned file holds at most this many characters (about 25,000 tokens in every request)."""


@dataclass
class SessionServices:
    """The session's side of its compactor's services (see the module docstring). The model,
    the settings and the summariser are read when used: `configure` may change them."""

    workspace: Path
    history: History
    transcript: Transcript
    ledger: Ledger
    tools: Sequence[Tool]
    model: Callable[[], Model]
    settings: Callable[[], SessionSettings]
    summariser: Callable[[], Summariser]
    emit: Callable[[Event], None]
    redact: Callable[[str], str]
    pins: Callable[[bool], tuple[str, ...]]

    def __post_init__(self) -> None:
        self.outputs = outputs_shown(self.transcript.directory, self.workspace)
        """The folder saved outputs are shown in (recorded at the start; replay shows it too)."""

    def compaction(self) -> CompactionServices:
        """The compactor's services, this session's."""
        return CompactionServices(
            emit=self.emit,
            summarise=self.summarise,
            save_output=self.save_output,
            snapshot=lambda messages: str(self.transcript.snapshot(messages)),
            read_file=self.read_for_compaction,
            model=lambda: self.model().name,
            server_summarise=self.server_summarise,
            pins=self.pins,
            tools=lambda: tuple(tool.name for tool in self.tools),
        )

    def summarise(self, messages: Sequence[Message], focus: str | None) -> Summary:
        """A summary by the session's summariser: of the whole history, asked in the prompt
        the agent's last call cached (when the summariser asks in context); priced; redacted."""
        prompt = None
        if self.history.is_whole(messages):
            # The whole history: the prompt the agent's last call cached. (Part of it, as
            # SummariseOlder asks, ends where no cache entry is: asked as text.)
            tools = [tool.definition() for tool in self.tools]
            prompt = AgentPrompt(self.settings().system, tools, self.settings().cache)
        summary = self.summariser().summarise(messages, focus, self.model(), prompt)
        cost = self.ledger.charge(summary.usage, summary.model, summary=True)
        if cost is None and (note := self.ledger.unpriced_notice(summary.model)):
            self.emit(Notice("unpriced_model", note))
        return replace(summary, text=self.redact(summary.text), cost_usd=cost)

    def server_summarise(
        self, messages: Sequence[Message], focus: str | None
    ) -> tuple[dict[str, Any], Summary]:
        """The API's own summary of `messages` (its compaction block), priced."""
        request = server.summary_request(
            messages, focus, system=self.settings().system, tools=self._definitions(),
            max_tokens=self.settings().max_tokens,
        )  # fmt: skip
        reply = self.model().respond(request)
        block, usage = server.summary_block(reply)
        cost = self.ledger.charge(usage, reply.model, summary=True)
        block = server.entering(block, self.redact)  # where the API's summary enters
        text = block["content"] if block["type"] == "compaction" else block["text"]
        return block, Summary(text, usage, reply.model, cost)

    def server_preview(self, strategy: Strategy) -> Preview:
        """What a server strategy's edits would take out of the prompt now: `count_tokens`
        with them (free) against the count without them."""
        view = list(self.history.view())
        before = self.history.size()
        params = server.request_params([strategy])
        request = ModelRequest(
            messages=view, max_tokens=self.settings().max_tokens, system=self.settings().system,
            tools=self._definitions(), context_management=params.context_management,
            betas=params.betas,
        )  # fmt: skip
        count = getattr(self.model(), "count_tokens", None)
        if count is None or not view or params.context_management is None:
            why = "no edit to count" if params.context_management is None else "nothing to count"
            if count is None:
                why = f"the model {self.model().name!r} cannot count tokens"
            return Preview(strategy.name, strategy.when, before, before, view, why, original=view)
        edited, original = count(request)
        after = replace(before, tokens=edited, tokens_exact=True)
        return Preview(
            strategy.name, strategy.when, before, after, view, None, original=view,
            input_tokens=edited, original_input_tokens=original,
        )  # fmt: skip

    def read_for_compaction(self, path: str, max_chars: int) -> str | None:
        """A workspace file as a compaction puts it back: read as read_file reads it, and
        redacted as a tool result is."""
        text = read_text(self.workspace, path, max_chars)
        return None if text is None else self.redact(text)

    def read_pinned_file(self, path: str) -> str:
        """A workspace file's text to pin; ValueError (or the file tools' ToolError) saying
        why it cannot be."""
        if not isinstance(path, str) or not path.strip():
            raise ValueError("pin(path=...) needs a workspace file's path")
        text = read_text(self.workspace, path, PIN_FILE_MAX_CHARS)  # raises ToolError saying why
        if text is None:
            raise ValueError(f"{path} is too large to pin (over {PIN_FILE_MAX_CHARS:,} characters)")
        if not text.strip():
            raise ValueError(f"{path} is empty: nothing to pin")
        return text

    def save_output(self, tool_use_id: str, text: str) -> str:
        """Save a tool output whole in the session's folder; the path shown to the model."""
        self.transcript.save_tool_output(tool_use_id, text)
        return output_shown(self.outputs, tool_use_id)

    def tool_context(
        self,
        request_compaction: Callable[[str | None], None],
        state: CompactState,
        notices: set[str],
        notes: dict[str, Any],
    ) -> ToolContext:
        """What the tools of one batch get: the workspace, the settings of bash, the hook of
        the compact tool, and where a touched file is noted (the recent files a compaction
        lists); the transcripts stay read-only to them."""
        settings = self.settings()
        return ToolContext(
            workspace=self.workspace,
            on_file=lambda path: state.note_file(path, settings.policy.max_recent_files),
            request_compaction=request_compaction,
            bash_timeout=settings.bash_timeout,
            sandbox=settings.sandbox,
            read_only=(self.transcript.root,),
            bash=settings.bash,
            notices=notices,
            notes=notes,
            originals=self.transcript.directory,
            shown=self.shown_result,
        )

    def shown_result(self, tool_use_id: str) -> str | None:
        """The text of that tool use's result as the history holds it now (None: gone)."""
        view = self.history.view()
        for ref in reversed(self.history.tool_results()):
            if ref.tool_use_id == tool_use_id:
                return block_text(view[ref.index]["content"][ref.block_index])
        return None

    def _definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.tools]
