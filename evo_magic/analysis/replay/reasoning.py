"""The reasoning a Codex turn sends back with each of its calls, in tokens.

Codex asks the Responses API for encrypted reasoning (`store` off) and sends every reasoning
item of the history back with each request; the server counts those of the current turn (since
the last user message) and drops the earlier ones. A rollout keeps each item's encrypted
content and, on the `token_count` that closed its call, the reasoning tokens the model produced
(`reasoning_output_tokens`). The rule, taken from the source rather than fitted: a call's
prompt holds the reasoning tokens of the earlier calls of its turn, as their usage counted them.
On a real gpt-5.4 turn a call that reasoned 3,624 tokens made the next prompt 5,038 tokens longer
(its whole output and a short tool result), and on a real gpt-5.3-codex rollout the prompt fell at
each new turn by the turn's reasoning tokens to within 45 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from evo_magic.analysis.conversation import Call

RETURNS_REASONING = frozenset({"codex"})
"""Sources whose client sends a turn's reasoning back with the turn's later calls."""


@dataclass
class SentReasoning:
    """The reasoning tokens the next call of a conversation sends back (0 where the source's
    client sends none back)."""

    applies: bool
    tokens: int = 0

    def answered(self, call: Call) -> None:
        """`call` replied: its reasoning is sent back with the rest of its turn."""
        if self.applies and call.reasoning_tokens:
            self.tokens += call.reasoning_tokens

    def turn_began(self) -> None:
        """A user message (or a compaction) began a turn: the server drops the reasoning
        before it."""
        self.tokens = 0
