"""The prompt cache a replayed conversation is modelled with, and its prices: where each call's
breakpoints go (the live rule, `place_breakpoints`), what the call reads from the cache and
writes to it (`PrefixCache`), what it costs, and what the live `PrefixTracker` that
cache-aware strategies consult learns from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evo_magic.analysis.replay.calibration import Calibration
from evo_magic.cost import Price, PriceTable, call_cost
from evo_magic.encoded import PLAIN, EncodedBlocks
from evo_magic.history import History
from evo_magic.measure import TokenAnchor, TokenRate
from evo_magic.prompt_cache import (
    Breakpoint,
    CacheRequest,
    CacheSettings,
    PrefixCache,
    PrefixChain,
    PrefixTracker,
    Spot,
    min_cacheable_tokens,
    place_breakpoints,
    prefix_key,
    start_key,
)
from evo_magic.usage import Usage


def tokens_per_char(calibration: Calibration | None) -> float:
    """The conversation's calibrated tokens per character (the project's default rate before
    calibration)."""
    return calibration.tokens_per_char if calibration else TokenRate().rate


class Pricing:
    """The modelled prompt cache and the prices of one run (see the module docstring).

    `cache_settings`, `prices` (what calls cost) and `decision_prices` (what cache-aware
    strategies weigh) follow the settings timeline (`AppliedSettings`); `chain` is the
    conversation as sent, `served_chain` the prompt the modelled server leaves (what the cache
    sees under server strategies)."""

    def __init__(
        self,
        model: str,
        prices: PriceTable | None,
        cache_settings: CacheSettings | None,
        calibration: Calibration | None,
        encoded: EncodedBlocks = PLAIN,
    ):
        self.model = model
        self._encoded = encoded
        self.cache_settings = cache_settings or CacheSettings()
        self.prices = prices or _default_prices()
        self.decision_prices = self.prices
        self.rate = tokens_per_char(calibration)
        self.now = 0.0
        """The time of the latest call (the recorded clock, never moved back)."""
        self.tracker = PrefixTracker(clock=lambda: self.now)
        self.chain = PrefixChain(start_key(model), encoded)
        self.served_chain = PrefixChain(start_key(model), encoded)
        self._followed = _Followed()
        self.cache = PrefixCache(min_tokens=min_cacheable_tokens(model) or 0)
        self._prices_seen: dict[tuple[int, str], Price | None] = {}

    def tools_changed(self, names: Sequence[str]) -> None:
        """The request's tools changed (added, removed or reordered): the prompt starts
        differently, so no cached prefix of the conversation matches any more."""
        start = prefix_key(start_key(self.model), "tools", list(names))
        self.chain = PrefixChain(start, self._encoded)
        self.served_chain = PrefixChain(start, self._encoded)
        self.tracker.replaced()  # what cache-aware strategies weigh: nothing cached (as live)

    def follow(self, history: History) -> PrefixChain:
        """The conversation as sent (`chain`), brought up to `history` as it stands: only the
        messages the history changed since the last call are looked at."""
        self.chain.update(history.view(), self._followed.unchanged(history))
        return self.chain

    def advance(self, timestamp: float | None) -> None:
        """The clock at a call recorded at `timestamp` (None: not recorded)."""
        # Calls come in record order; a clock that ran backwards does not move time back.
        self.now = max(self.now, float(timestamp or self.now))

    def spots(self, view: Sequence[dict[str, Any]], *, mark_newest: bool = True) -> list[Spot]:
        """The conversation's cache breakpoints, placed by the live rule."""
        placed = place_breakpoints(
            view,
            settings=self.cache_settings,
            edited_from=self.tracker.edited_from,
            mark_newest=mark_newest,
            copy=False,  # only the spots are read: no copy of the history's list per call
        )
        return [spot for spot in placed.breakpoints if spot.section == "messages"]

    def usage(
        self,
        tokens: int,
        spots: list[Spot],
        summary: int = 0,
        chain: PrefixChain | None = None,
    ) -> Usage:
        """The usage of a call of `tokens` prompt tokens under the modelled prompt cache, with
        the tools and system prompt cached at their end and the conversation (`chain`: the
        one sent, else the prompt the modelled server left) at `spots`. With
        `summary` tokens, a summary asked after the conversation: its instructions end the
        prompt."""
        settings = self.cache_settings
        if not settings.enabled:
            return Usage(input_tokens=tokens + summary)
        scale = self.rate
        chain = chain or self.chain
        # What is not messages (tools, system prompt), as the history's anchor counts it.
        overhead = TokenAnchor(chain.chars, tokens, scale).overhead_tokens

        breakpoints = [Breakpoint(overhead, chain.start, settings.prefix_ttl)]
        breakpoints += [chain.breakpoint(spot, overhead, scale) for spot in spots]
        prompt = max(tokens, overhead + round(scale * chain.chars)) + summary
        return self.cache.call(CacheRequest(self.now, prompt, tuple(breakpoints))).to_usage()

    def in_context_usage(
        self,
        history: History,
        messages: Sequence[dict[str, Any]],
        instructions: int,
        output: int,
    ) -> Usage | None:
        """The usage of a summary asked in the conversation of `messages` when they are the
        whole `history` (None otherwise: a part is asked as text): the agent's prompt as it
        stands, with the breakpoints the live loop places, then `instructions` tokens."""
        if not len(history) or not history.is_whole(messages):
            return None
        view = history.view()
        self.follow(history)
        spots = self.spots(view, mark_newest=False)
        usage = self.usage(history.size().tokens, spots, instructions)
        return replace(usage, output_tokens=output)

    def cost(self, usage: Usage, model: str) -> float | None:
        """What a call of `model` with `usage` costs (None: no price)."""
        priced = call_cost(usage, model, self.prices)
        return None if priced is None else priced.total

    def summary_cost(self, usage: Usage) -> float | None:
        """What a summarisation call with `usage` costs, at the run's model (None: no price)."""
        return self.cost(usage, self.model)

    def after_call(self, seen: Usage, messages_sent: int, model: str) -> None:
        """Tell the live tracker a call that sent `messages_sent` messages to `model` came
        back with `seen`, as the live loop does after each call."""
        self.tracker.after_call(seen, messages_sent, self.cache_settings, self._price(model))

    def _price(self, model: str) -> Price | None:
        """The decisions' price of `model` (looked up once per price table)."""
        if not model:
            return None
        key = (id(self.decision_prices), model)
        if key not in self._prices_seen:
            self._prices_seen[key] = self.decision_prices.lookup(model)
        return self._prices_seen[key]


class _Followed:
    """Where a history stood when last followed: how many of its first messages are still
    the same objects (none after it was replaced; up to the first one changed in place)."""

    def __init__(self) -> None:
        self._history: int | None = None
        self._generation = -1
        self._edits = 0
        self._length = 0

    def unchanged(self, history: History) -> int:
        """Messages of `history` unchanged since the last call (and note where it stands)."""
        count = 0
        if id(history) == self._history and history.generation == self._generation:
            count = min(history.edited_since(self._edits), default=self._length)
            count = min(count, self._length)
        self._history, self._generation = id(history), history.generation
        self._edits, self._length = history.edit_count, len(history)
        return count


def _default_prices() -> PriceTable:
    from evo_magic.cost import price_table

    return price_table(None)
