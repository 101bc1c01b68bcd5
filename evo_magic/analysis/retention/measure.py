"""One measure of retention: the facts of every main conversation followed through replay's
own pass under each strategy setting, then (with a reader) probed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.replay import ReplayedCall, StrategySpec, replay
from evo_magic.analysis.retention.conversations import Conversation, conversations
from evo_magic.analysis.retention.facts import Fact
from evo_magic.analysis.retention.kept import Follow
from evo_magic.analysis.retention.probes import Prober, default_cache_dir
from evo_magic.analysis.retention.results import (
    CALL_COLUMNS,
    FACT_COLUMNS,
    KEPT_COLUMNS,
    PROBE_COLUMNS,
    SENT_COLUMNS,
    SPAN_COLUMNS,
    frame,
)
from evo_magic.analysis.retention.rows import Row, measured_rows, probe_rows
from evo_magic.cost import price_table
from evo_magic.models.base import Model

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.transcripts import Transcripts


@dataclass(frozen=True)
class Measure:
    """What `retention` measures: the same for every session of a sweep (it is sent to the
    workers, so it pickles when its models do)."""

    strategies: dict[str, StrategySpec]
    given: list[Fact] | None
    reader: Model | None
    judge: Model | None
    replicates: int
    options: dict[str, Any]
    """`replay`'s options (`model`, `policy`, `prices`, `cache`, `cache_dir`, ...)."""


FRAMES = {
    "facts": FACT_COLUMNS,
    "kept": KEPT_COLUMNS,
    "calls": CALL_COLUMNS,
    "probes": PROBE_COLUMNS,
    "spans": SPAN_COLUMNS,
    "sent": SENT_COLUMNS,
}
"""The frames one measure gives (with replay's own `replayed` calls): everything the totals
and the warnings are computed from, so a sweep's sessions concatenate into one measure."""


def measure(t: Transcripts, spec: Measure) -> dict[str, pd.DataFrame]:
    """The frames of `spec` measured on `t` in one replay pass (then probed, with a reader)."""
    found = {c.session_id: c for c in conversations(t, spec.given)}
    follower = _Follower(found)
    replayed = replay(t, spec.strategies, on_call=follower, **spec.options)
    for follow in follower.follows.values():
        follow.finish()
    rows = measured_rows(found, follower.follows, _probes(follower.follows, spec))
    frames = {name: frame(rows[name], columns) for name, columns in FRAMES.items()}
    return {**frames, "replayed": replayed.calls}


class _Follower:
    """Replay's observer: each main conversation followed under each setting (a `Follow` per
    pair, made at its first call)."""

    def __init__(self, found: dict[str, Conversation]):
        self.found = found
        self.follows: dict[tuple[str, str], Follow] = {}

    def __call__(self, replayed: ReplayedCall) -> None:
        if replayed.agent_id is not None or replayed.session_id not in self.found:
            return
        key = (replayed.strategy, replayed.session_id)
        follow = self.follows.get(key)
        if follow is None:
            c = self.found[replayed.session_id]
            last = c.calls[-1] if c.calls else None
            follow = Follow(replayed.strategy, c.facts, c.first_ordinals, c.matcher, last)
            self.follows[key] = follow
        follow(replayed)


def _probes(follows: dict[tuple[str, str], Follow], spec: Measure) -> list[Row]:
    """The probes' answers (none without a reader), cached under replay's `cache_dir`."""
    if spec.reader is None:
        return []
    cache_dir = spec.options.get("cache_dir")
    prober = Prober(
        spec.reader,
        spec.judge,
        price_table(spec.options.get("prices")),
        Path(cache_dir).expanduser() if cache_dir else default_cache_dir(),
    )
    return probe_rows(follows, prober, spec.replicates)
