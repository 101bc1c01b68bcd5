"""What the session remembers about compaction for its whole life (across asks), and the one
place that changes it: each outcome (a compaction applied, a failure, a refill, a new limit)
is one method here, so live and replay, client and server compactions count alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import Notice

REFILL_CALLS = 2
"""A refill: over the limit again within this many calls of an automatic full compaction."""
RETRY_GROWTH = 0.1
"""After a failure, automatic compaction waits until the context grew by this share of the
limit."""


@dataclass
class CompactState:
    """The seed's CompactState, plus the back-off and the thrash detection of automatic
    compaction. Read it freely; change it through its methods (the compactor does)."""

    has_compacted: bool = False
    last_summary: str = ""
    recent_files: list[str] = field(default_factory=list)
    compact_count: int = 0
    consecutive_failures: int = 0
    """Failed automatic (or model-requested) compactions in a row; at `max_failures` automatic
    compaction pauses until a compaction by hand succeeds or the session is reset."""
    retry_after_chars: int = 0
    """After a failure, automatic compaction waits until the context is at least this big."""
    refills: int = 0
    """Automatic compactions in a row after which the context was over the limit again within
    two calls; at `max_refills` automatic compaction pauses (thrash detection)."""
    calls_since_auto: int | None = None
    """Model calls since the last automatic full compaction, while a refill is watched for."""
    strategy_failures: dict[str, int] = field(default_factory=dict)
    """Failures in a row of each every-call strategy; at `max_failures` it stops running
    before each call until the strategies are set again or the session is reset."""

    # -- reading ---------------------------------------------------------------------------

    def paused(self, policy: CompactPolicy) -> bool:
        """True when automatic compaction is paused: too many failures, or thrashing."""
        return self.consecutive_failures >= policy.max_failures or self.thrashing(policy)

    def thrashing(self, policy: CompactPolicy) -> bool:
        """True when automatic compaction paused because the context kept refilling."""
        return 0 < policy.max_refills <= self.refills

    def backing_off(self, chars: int) -> bool:
        """True while the context has not grown enough since the last failure."""
        return chars < self.retry_after_chars

    # -- the one writer --------------------------------------------------------------------

    def note_file(self, path: str, limit: int) -> None:
        """Remember a touched file: FIFO of at most `limit`; a repeated path moves last."""
        if path in self.recent_files:
            self.recent_files.remove(path)
        self.recent_files.append(path)
        del self.recent_files[: max(0, len(self.recent_files) - limit)]

    def compacted(self, trigger: str, summary: str | None, still_over: int | None) -> None:
        """A full compaction replaced the history (any strategy, the server's, a recorded
        one): the back-off is over; `still_over` is the size in characters when the result is
        over the limit still (wait for growth before the next automatic one), else None. By
        hand, a thrash pause is lifted; an automatic one starts the watch for a refill."""
        self.has_compacted = True
        if summary:
            self.last_summary = summary
        self.compact_count += 1
        self.consecutive_failures = 0
        self.retry_after_chars = 0 if still_over is None else still_over
        if trigger == "auto":
            self.calls_since_auto = 0
        elif trigger == "user":
            self.refills, self.calls_since_auto = 0, None

    def failed(self, trigger: str, retry_after: int, policy: CompactPolicy) -> Notice | None:
        """A compaction failed. An automatic or model-requested one counts (and backs off
        until the context is `retry_after` characters); at `max_failures` in a row automatic
        compaction pauses: the Notice saying so (once), else None."""
        if trigger not in ("auto", "model"):
            return None
        self.consecutive_failures += 1
        self.retry_after_chars = retry_after
        if self.consecutive_failures != policy.max_failures:
            return None
        return Notice(
            "auto_compaction_paused",
            f"Automatic compaction failed {self.consecutive_failures} times in a row and is "
            "paused; compact by hand (Session.compact / %compact) or reset the session.",
        )

    def before_call(self, over_limit: bool, policy: CompactPolicy, limit: str) -> Notice | None:
        """Thrash detection, once per model call: over the limit (`over_limit`) again within
        `REFILL_CALLS` calls of an automatic full compaction is a refill; at `max_refills` in a
        row automatic compaction pauses: the Notice saying so (`limit` in words), else None."""
        if self.calls_since_auto is None:
            return None
        self.calls_since_auto += 1
        if self.calls_since_auto > REFILL_CALLS:
            self.calls_since_auto, self.refills = None, 0  # it held: the streak is over
            return None
        if not over_limit or self.paused(policy):
            return None
        self.calls_since_auto = None
        self.refills += 1
        if not self.thrashing(policy):
            return None
        return Notice(
            "auto_compaction_thrashing",
            f"Automatic compaction is paused: the context was over the limit ({limit}) again "
            f"within {REFILL_CALLS} calls after each of the last {self.refills} compactions, so "
            "compacting again would not help. Raise context_limit / token_limit, choose a "
            "strategy that keeps less, or raise max_refills; %compact (Session.compact) still "
            "works.",
        )

    def strategy_paused(self, name: str, policy: CompactPolicy) -> bool:
        """True when the every-call strategy `name` failed `max_failures` times in a row."""
        return self.strategy_failures.get(name, 0) >= policy.max_failures

    def strategy_ok(self, name: str) -> None:
        """The strategy `name` did its work: its failures in a row are over."""
        self.strategy_failures.pop(name, None)

    def strategy_failed(self, name: str, policy: CompactPolicy) -> Notice | None:
        """The every-call strategy `name` failed; at `max_failures` in a row it stops running
        before each call: the Notice saying so (once), else None."""
        failures = self.strategy_failures[name] = self.strategy_failures.get(name, 0) + 1
        if failures != policy.max_failures:
            return None
        return Notice(
            "strategy_paused",
            f"The strategy {name!r} failed {failures} times in a row and no longer runs before "
            "each call; set the strategies again or reset the session to retry it.",
        )

    def strategies_changed(self) -> None:
        """New strategies: none has failed yet."""
        self.strategy_failures.clear()

    def limits_changed(self) -> None:
        """New limits: a pause for refilling is lifted."""
        self.refills = 0


def retry_at(chars: int, policy: CompactPolicy) -> int:
    """The size in characters automatic compaction waits for after a failure at `chars`."""
    return chars + max(1, int(policy.context_limit * RETRY_GROWTH))
