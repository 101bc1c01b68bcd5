"""Tokens of a replayed prompt, from its characters, calibrated on a conversation's recorded
calls: the recorded count for the recorded request, else the recorded count plus the change in
characters at the conversation's own tokens per character (`measure.TokenRate`'s fit).

A prompt's fixed part (system prompt, tools, what the agent attaches) is not the same all
along a session: after a compaction Claude Code sends other attachments (files read again,
reminders), so the fixed part of a stretch between compactions can differ from the one before
by thousands of tokens. The per-call estimate (`Calibration.estimate`) therefore fits one
rate on the differences within each stretch and a fixed part per stretch (`Stretches`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evo_magic.measure import TokenAnchor, TokenRate, anchored_tokens, estimate_tokens


@dataclass(frozen=True)
class Stretches:
    """A conversation's tokens per character fitted within its stretches between compactions,
    and each stretch's fixed part in tokens (see the module's docstring)."""

    rate: float
    overheads: dict[int, float]
    """Stretch (compactions before it) -> its fitted fixed part, in tokens."""
    of_call: dict[int, int]
    """Recorded call -> the stretch it was sent in."""

    @classmethod
    def fit(
        cls, points: list[tuple[int, int, int]], of_call: dict[int, int], pooled: TokenRate
    ) -> Stretches:
        """The fit of `(chars, tokens, stretch)` counts: the slope of tokens on characters
        within the stretches (each stretch's means removed), the pooled fit's rate when that
        is not plausible or the stretches span too few characters (as `TokenRate` decides);
        then each stretch's fixed part at that rate."""
        by_stretch: dict[int, list[tuple[int, int]]] = {}
        for chars, tokens, stretch in points:
            by_stretch.setdefault(stretch, []).append((chars, tokens))
        sxx = sxy = 0.0
        spread = 0
        means: dict[int, tuple[float, float]] = {}
        for stretch, counts in by_stretch.items():
            mean_c = sum(c for c, _ in counts) / len(counts)
            mean_t = sum(t for _, t in counts) / len(counts)
            means[stretch] = (mean_c, mean_t)
            sxx += sum((c - mean_c) ** 2 for c, _ in counts)
            sxy += sum((c - mean_c) * (t - mean_t) for c, t in counts)
            spread = max(spread, max(c for c, _ in counts) - min(c for c, _ in counts))
        rate = sxy / sxx if sxx > 0 and spread >= TokenRate.MIN_SPREAD else pooled.rate
        if not 0.05 <= rate <= 1.0:
            rate = pooled.rate
        overheads = {s: max(mean_t - rate * mean_c, 0.0) for s, (mean_c, mean_t) in means.items()}
        return cls(rate, overheads, dict(of_call))

    def overhead(self, call: int | None) -> float | None:
        """The fixed part of the stretch `call` was sent in (None: not known)."""
        stretch = self.of_call.get(call) if call is not None else None
        return None if stretch is None else self.overheads.get(stretch)


@dataclass
class Calibration:
    """Tokens of a prompt from its characters, fitted on a conversation's recorded calls."""

    rate: TokenRate
    reference: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Per call: the recorded request's digest and characters, as rebuilt."""
    stretches: Stretches | None = None
    """The fit per stretch between compactions, for the per-call estimate."""

    @property
    def tokens_per_char(self) -> float:
        return self.rate.rate

    def estimate(self, chars: int, call: int | None = None) -> int:
        """Tokens of a request of `chars` characters by the fit alone: at recorded call `call`,
        with the fixed part of the stretch it was sent in."""
        fixed = None if self.stretches is None else self.stretches.overhead(call)
        if fixed is None or self.stretches is None:
            return max(round(self.rate.overhead + self.rate.rate * chars), 1)
        return max(round(fixed + self.stretches.rate * chars), 1)

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
