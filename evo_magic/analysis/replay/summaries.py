"""Summaries for a replay: the recorded one where a strategy summarises exactly what the
session summarised, a real one (cached on disk by its input's hash, so a sweep never pays
twice) with `summariser=`, else a stand-in of the right size. Each is priced as a call of its
own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evo_magic.analysis.cached import read_entry, write_entry
from evo_magic.analysis.replay.recording import digest
from evo_magic.compact.policy import CompactPolicy
from evo_magic.measure import CHARS_PER_TOKEN
from evo_magic.models.base import Model
from evo_magic.summariser import IN_CONTEXT_NOTE, SUMMARY_INSTRUCTIONS, Summariser, Summary
from evo_magic.usage import Usage

DEFAULT_SUMMARY_TOKENS = 2_000
STAND_IN = "[replay stand-in summary, {tokens:,} tokens] "


class Summaries:
    """The summariser a replayed compactor calls (see the module docstring)."""

    def __init__(
        self,
        recorded: dict[str, str],
        stand_in_tokens: int,
        summariser: Model | Summariser | None,
        cache_dir: Path | None,
        policy: CompactPolicy,
        tokens_of: Callable[[int], int],
        in_context: Callable[[Sequence[dict[str, Any]], int, int], Usage | None],
    ):
        self.recorded = recorded
        self.stand_in_tokens = stand_in_tokens
        self.summariser = summariser
        self.cache_dir = cache_dir
        self.tokens_of = tokens_of
        self.in_context = in_context
        self.used: list[str] = []
        self.use_policy(policy)

    def use_policy(self, policy: CompactPolicy) -> None:
        """Ask summaries as `policy` says from now on (its input limit, in context or not)."""
        self.policy = policy
        self.request = policy.summariser().request

    def __call__(self, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        key = digest(list(messages))
        if key in self.recorded:
            self.used.append("recorded")
            text = self.recorded[key]
            return Summary(text, self.estimate_usage(messages, focus, text), "recorded")
        if self.summariser is not None:
            self.used.append("model")
            return self._real(key, messages, focus)
        self.used.append("stand-in")
        text = STAND_IN.format(tokens=self.stand_in_tokens)
        text += "x" * max(int(self.stand_in_tokens * CHARS_PER_TOKEN) - len(text), 0)
        return Summary(text, self.estimate_usage(messages, focus, text), "stand-in")

    def estimate_usage(
        self, messages: Sequence[dict[str, Any]], focus: str | None, text: str
    ) -> Usage:
        """What the summary request costs in tokens: asked in context (the policy's
        `summary_in_context`, for the whole history), the agent's prompt read from the modelled
        cache and the instructions; else the session's text request (instructions and the
        conversation, cut to the input limit); the summary out."""
        output = self.tokens_of(len(text))
        if self.policy.summary_in_context:
            instructions = self.tokens_of(len(IN_CONTEXT_NOTE + SUMMARY_INSTRUCTIONS))
            usage = self.in_context(messages, instructions, output)
            if usage is not None:
                return usage
        sent = self.request(messages, focus).measured_chars()
        return Usage(input_tokens=self.tokens_of(sent), output_tokens=output)

    def _real(self, key: str, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        path = self.cache_dir / f"{key}-{digest([focus])}.json" if self.cache_dir else None
        entry = read_entry(path, ("text", "model")) if path is not None else None
        if entry is not None:  # a damaged entry is a miss: summarised again, and rewritten
            return Summary(entry[0]["text"], entry[1], entry[0]["model"])
        summariser = self.summariser
        if not isinstance(summariser, Summariser):
            summariser = Summariser(model=summariser)
        summary = summariser.summarise(messages, focus, summariser.model)
        if path is not None:
            record = {
                "text": summary.text,
                "usage": summary.usage.as_dict(),
                "model": summary.model,
            }
            write_entry(path, record)
        return summary


def median_summary_tokens(summary_chars: Any) -> int:
    """The median size in tokens of the recorded summaries (`summary_chars`), or the default
    when there are none."""
    import statistics

    from evo_magic.measure import estimate_tokens

    chars = [int(c) for c in summary_chars if int(c) > 0]
    if not chars:
        return DEFAULT_SUMMARY_TOKENS
    return max(estimate_tokens(int(statistics.median(chars))), 1)
