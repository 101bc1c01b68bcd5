"""The compactor's server side: what the server strategies add to each request, who takes over
when the model or the API does not offer one, and what a reply says the server did (a
compaction block that replaces the history, clearing edits applied to the prompt).

A server strategy edits no history itself (see `evo_magic.compact.server` for the request's
shape); this part of the compactor keeps what follows from it: the betas a compaction block in
the history must be sent with, and which configured strategy stands in for which server one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from evo_magic.catalog import COMPACT_EDIT
from evo_magic.compact import server
from evo_magic.compact.attempt import Attempt
from evo_magic.compact.base import Context, Strategy, server_edit
from evo_magic.events import CompactionFinished, Event, MicroCompacted, Notice
from evo_magic.history import History
from evo_magic.measure import ContextSize
from evo_magic.messages import Message
from evo_magic.usage import Usage


class _Compactor(Protocol):
    """The parts of the compactor its server side uses."""

    history: History
    strategies: tuple[Strategy, ...]

    def emit(self, event: Event) -> None: ...

    def snapshot(self, messages: list[Message]) -> str: ...

    def adopt(self, new: Sequence[Message], summary: str | None, trigger: str = ...) -> None: ...

    def failed(self, attempt: Attempt, reason: str) -> CompactionFinished: ...


class ServerSide:
    """The server strategies of one compactor (see the module docstring)."""

    def __init__(self, compactor: _Compactor):
        self._compactor = compactor
        self._block_betas: set[str] = set()
        """Betas of the compaction blocks the server made in this session."""
        self._fallback_for: dict[int, str] = {}
        """id of a fallback strategy -> the server strategy it stands in for."""

    def params(self, model: str, *, offline: bool = False) -> server.ServerParams:
        """What the server strategies add to the next request to `model`; those the capability
        table says it lacks (all of them for an `offline` stand-in, which has no server) give
        way to their fallbacks first (ValueError without one)."""
        strategies = self._compactor.strategies
        if offline:
            lacking = server.server_strategies(strategies)
            source = "the offline model has no server"
        else:
            lacking = server.unsupported(strategies, model)
            source = "the capability table says so"
        if lacking:
            names = ", ".join(s.name for s in lacking)
            why = f"the model {model} does not offer {names} ({source})"
            if not self.fall_back(lacking, why):
                raise ValueError(f"{why}, and no fallback is configured")
        params = server.request_params(self._compactor.strategies)
        if self._block_betas and self._compactor.history.holds_compaction():
            # A compaction block goes back with the beta that made it, whatever runs now.
            betas = tuple(dict.fromkeys([*params.betas, *sorted(self._block_betas)]))
            params = replace(params, betas=betas)
        return params

    def fall_back(self, failing: Sequence[Strategy], why: str) -> bool:
        """Replace each failing server strategy by its fallback from now on, saying so once;
        False (nothing changed) when one has no fallback."""
        chosen = server.replaced_by_fallbacks(self._compactor.strategies, failing)
        if chosen is None:
            return False
        for strategy in failing:
            self._fallback_for[id(strategy.fallback)] = strategy.name  # type: ignore[attr-defined]
        self._compactor.strategies = chosen
        ran = ", ".join(f"{s.fallback.name} for {s.name}" for s in failing)  # type: ignore[attr-defined]
        self._compactor.emit(
            Notice("server_fallback", f"Falling back to {ran} from now on: {why}.")
        )
        return True

    def rejected_for(self, strategy: Strategy, outcome: object) -> Strategy | None:
        """When the API refused an on-demand server strategy's feature (a failure naming it, or
        a reply without the block it makes) and it has a fallback: the fallback, which takes
        over from now on; else None."""
        edit = server_edit(strategy)
        fallback = getattr(strategy, "fallback", None)
        if edit is None or fallback is None or not isinstance(outcome, CompactionFinished):
            return None
        if outcome.success or not server.not_offered(outcome.error or "", edit):
            return None
        self.fall_back([strategy], f"the API rejected {strategy.name}: {outcome.error}")
        return fallback

    def stands_in_for(self, name: str) -> str | None:
        """The server strategy that the configured strategy `name` is the fallback of."""
        for strategy in self._compactor.strategies:
            if strategy.name == name and id(strategy) in self._fallback_for:
                return self._fallback_for[id(strategy)]
        return None

    def fallback_of(self, strategy: Strategy) -> str | None:
        """The server strategy `strategy` stands in for (None: it stands in for none)."""
        return self._fallback_for.get(id(strategy))

    def summarised(self) -> None:
        """The API made a summary on demand: its block goes back with its beta from now on."""
        self._block_betas.add(server.SUMMARIZE_BETA)

    def compacted(
        self,
        before: ContextSize,
        summary: str | None,
        usage: Usage,
        cost: float | None,
        after_tokens: int | None,
    ) -> CompactionFinished:
        """The last reply holds a server's compaction block: the history becomes what the server
        reads from now on (the reply from that block on, then the pending request verbatim),
        the original on disk first. A block with null content failed: it stays, as it came.
        The record names the strategy whose edit compacts; its `before` tokens are what the
        compaction iteration (`usage`) read, exact."""
        compactor = self._compactor
        self._block_betas.add(server.COMPACT_BETA)
        # The strategy whose edit compacts, not the first server strategy configured.
        name = self.name_of(COMPACT_EDIT)
        if name == COMPACT_EDIT:
            name = "server-compact"
        if usage.context_tokens > 0:
            # What the server read, as its compaction iteration says: exact, not the estimate.
            before = replace(before, tokens=usage.context_tokens, tokens_exact=True)
        attempt = Attempt(name, "every_call", "server", None, before, usage=usage, cost_usd=cost)
        if summary is None:
            why = "the server's summary failed (its compaction block has null content)"
            return compactor.failed(attempt, why)
        history = compactor.history
        messages = history.messages
        snapshot = compactor.snapshot(messages)
        new = _compacted_history(messages[-1], summary, history.pending_request)
        compactor.adopt(new, summary, trigger="server")
        after = history.size()
        if after_tokens:
            after = replace(after, tokens=after_tokens, tokens_exact=True)
        event = attempt.succeeded(after, summary=summary, snapshot_path=snapshot)
        compactor.emit(event)
        return event

    def cleared(self, applied: Sequence[dict[str, Any]], sent: ContextSize) -> None:
        """What the server's clearing edits did to the prompt of the last call, as
        `MicroCompacted` events (the history itself is unchanged)."""
        for edit in applied:
            tokens = int(edit.get("cleared_input_tokens") or 0)
            after = replace(sent, tokens=max(sent.tokens - tokens, 0))
            name = self.name_of(edit.get("type"))
            self._compactor.emit(
                MicroCompacted((), 0, sent, after, name, cleared_tokens=tokens, applied=dict(edit))
            )

    def name_of(self, feature: Any) -> str:
        """The configured server strategy whose edit is `feature` (the feature itself when
        none is)."""
        for strategy in server.server_strategies(self._compactor.strategies):
            edit = server_edit(strategy)
            if edit is not None and edit.feature == feature:
                return strategy.name
        return str(feature)


def _compacted_history(reply: Message, summary: str, pending: str | None) -> list[Message]:
    """The history after the server's compaction in `reply` (the last message): the reply
    from its compaction block on, then the pending request verbatim when the block ends the
    reply. A block whose summary held a credential came in as its redacted text
    (`server.entering`): that text becomes a compacted message of our own, the rest of the
    reply after it."""
    content = reply["content"]
    if server.compaction_index(content) is not None:
        new = [server.from_compaction(reply)]
        if content[-1].get("type") == "compaction" and pending:
            new += Context.for_messages(new, pending_request=pending).pending_request_message()
        return new
    rest = content[content.index(server.stand_in(summary)) + 1 :]
    ours = Context.for_messages([], pending_request=pending).compacted_message(summary)
    return [ours, *([{"role": "assistant", "content": rest}] if rest else [])]
