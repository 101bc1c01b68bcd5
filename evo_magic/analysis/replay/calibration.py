"""Tokens of a replayed prompt, from its characters, calibrated on a conversation's recorded
calls: the recorded count for the recorded request, else the recorded count plus the change in
characters at the conversation's own tokens per character (`measure.TokenRate`'s fit)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evo_magic.measure import TokenAnchor, TokenRate, anchored_tokens, estimate_tokens


@dataclass
class Calibration:
    """Tokens of a prompt from its characters, fitted on a conversation's recorded calls."""

    rate: TokenRate
    reference: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Per call: the recorded request's digest and characters, as rebuilt."""

    @property
    def tokens_per_char(self) -> float:
        return self.rate.rate

    def estimate(self, chars: int) -> int:
        """Tokens of a request of `chars` characters by the fit alone."""
        return max(round(self.rate.overhead + self.rate.rate * chars), 1)

    def same_request(self, call: int, digest: str) -> bool:
        """True when a request of this digest at `call` is the recorded one."""
        ref = self.reference.get(call)
        return ref is not None and ref[0] == digest

    def tokens(self, call: int, digest: str, chars: int, recorded: int | None) -> tuple[int, bool]:
        """(tokens, exact) for a request of `chars` characters at recorded call `call`."""
        ref = self.reference.get(call)
        if recorded is not None and ref is not None:
            if ref[0] == digest:
                return recorded, True
            anchor = TokenAnchor(ref[1], recorded, self.rate.rate)  # the live history's rule
            return max(anchored_tokens(chars, anchor), 1), False
        return self.estimate(chars), False


def tokens_of(chars: int, calibration: Calibration | None) -> int:
    """Characters of a request in tokens: at the conversation's calibrated rate, else the
    project's estimate (`measure.estimate_tokens`)."""
    if calibration is None:
        return estimate_tokens(chars)
    return round(chars * calibration.tokens_per_char)
