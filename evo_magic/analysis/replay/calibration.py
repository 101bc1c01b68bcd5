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
    thinking_rate: float | None = None
    """Tokens per character of thinking blocks, where the calls tell it (None: `rate`)."""

    MAX_THINKING_RATE = 2.0
    """Above this many tokens per character a fitted thinking rate is not believed."""

    @classmethod
    def fit(
        cls, points: list[tuple[int, int, int, int]], of_call: dict[int, int], pooled: TokenRate
    ) -> Stretches:
        """The fit of `(chars, thinking chars, tokens, stretch)` counts: the slope of tokens on
        characters within the stretches (each stretch's means removed); the thinking blocks'
        characters at a rate of their own where they span `TokenRate.MIN_SPREAD` characters
        and the fit is plausible (a transcript keeps a summary of long thinking, while the
        server counts what the model thought); the pooled fit's rate when the slope is not
        plausible or the stretches span too few characters (as `TokenRate` decides); then
        each stretch's fixed part at those rates."""
        by_stretch: dict[int, list[tuple[float, float, float]]] = {}
        for chars, thinking, tokens, stretch in points:
            by_stretch.setdefault(stretch, []).append((chars - thinking, thinking, tokens))
        sums = _centred_sums(by_stretch)
        rate, thinking_rate = _slopes(sums, pooled.rate)
        per_thinking = rate if thinking_rate is None else thinking_rate
        overheads = {
            stretch: max(t - rate * c - per_thinking * h, 0.0)
            for stretch, (c, h, t) in sums.means.items()
        }
        return cls(rate, overheads, dict(of_call), thinking_rate)

    def overhead(self, call: int | None) -> float | None:
        """The fixed part of the stretch `call` was sent in (None: not known)."""
        stretch = self.of_call.get(call) if call is not None else None
        return None if stretch is None else self.overheads.get(stretch)

    def tokens(self, fixed: float, chars: int, thinking: int) -> int:
        """Tokens of a prompt of `chars` characters, `thinking` of them thinking blocks."""
        other = self.thinking_rate if self.thinking_rate is not None else self.rate
        return max(round(fixed + self.rate * (chars - thinking) + other * thinking), 1)


@dataclass
class _Sums:
    """Sums of squares and products of the counts, each stretch's means removed."""

    means: dict[int, tuple[float, float, float]]
    """Stretch -> mean (other characters, thinking characters, tokens)."""
    cc: float = 0.0
    hh: float = 0.0
    ch: float = 0.0
    ct: float = 0.0
    ht: float = 0.0
    spread: float = 0.0
    """The widest span of characters within a stretch."""
    thinking_spread: float = 0.0
    """The widest span of thinking characters within a stretch."""


def _centred_sums(by_stretch: dict[int, list[tuple[float, float, float]]]) -> _Sums:
    """The sums of `(other chars, thinking chars, tokens)` counts per stretch."""
    sums = _Sums({s: _mean(counts) for s, counts in by_stretch.items()})
    means = sums.means
    for stretch, counts in by_stretch.items():
        mc, mh, mt = means[stretch]
        for c, h, t in counts:
            dc, dh, dt = c - mc, h - mh, t - mt
            sums.cc += dc * dc
            sums.hh += dh * dh
            sums.ch += dc * dh
            sums.ct += dc * dt
            sums.ht += dh * dt
        whole = [c + h for c, h, _ in counts]
        sums.spread = max(sums.spread, max(whole) - min(whole))
        thinking = [h for _, h, _ in counts]
        sums.thinking_spread = max(sums.thinking_spread, max(thinking) - min(thinking))
    return sums


def _mean(counts: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    n = len(counts)
    return (sum(c for c, _, _ in counts) / n, sum(h for _, h, _ in counts) / n,
            sum(t for _, _, t in counts) / n)  # fmt: skip


def _slopes(sums: _Sums, pooled: float) -> tuple[float, float | None]:
    """(tokens per character, tokens per thinking character or None for the same rate)."""
    det = sums.cc * sums.hh - sums.ch * sums.ch
    if sums.thinking_spread >= TokenRate.MIN_SPREAD and det > 0:
        rate = (sums.ct * sums.hh - sums.ht * sums.ch) / det
        thinking = (sums.ht * sums.cc - sums.ct * sums.ch) / det
        if 0.05 <= rate <= 1.0 and 0.0 <= thinking <= Stretches.MAX_THINKING_RATE:
            return rate, thinking
    xx = sums.cc + 2 * sums.ch + sums.hh  # one rate for all characters
    xy = sums.ct + sums.ht
    rate = xy / xx if xx > 0 and sums.spread >= TokenRate.MIN_SPREAD else pooled
    return (rate if 0.05 <= rate <= 1.0 else pooled), None


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

    def estimate(self, chars: int, call: int | None = None, thinking: int = 0) -> int:
        """Tokens of a request of `chars` characters (`thinking` of them thinking blocks) by
        the fit alone: at recorded call `call`, with the fixed part of the stretch it was sent
        in."""
        fixed = None if self.stretches is None else self.stretches.overhead(call)
        if fixed is None or self.stretches is None:
            return max(round(self.rate.overhead + self.rate.rate * chars), 1)
        return self.stretches.tokens(fixed, chars, thinking)

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
