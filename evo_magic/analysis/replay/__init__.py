"""Trace-driven replay: a recorded session under any compaction strategy, without a model.

    from evo_magic import replay
    r = replay("~/.claude/projects/my-project/", strategies={
        "recorded": "recorded", "none": [], "default": None,
        "clear-3": [ClearToolUses(keep=3)], "masking-10": [ObservationMasking(10)],
    }, model="claude-sonnet-4-5")
    r.calls, r.totals, r.plot()

Open loop: the recorded user requests, assistant turns and tool results are fed in order, and
before each recorded model call the strategies run exactly as in the live loop (the same
`History`, `Compactor` and `PrefixTracker`; breakpoints placed by `place_breakpoints`). What
would have been sent is measured and priced, with the prompt cache modelled: a strategy that
edits old messages pays the cache writes it causes. Output tokens are the recorded ones. The
agent's actions are held fixed: replay measures context and cost, not how the agent would have
behaved with another context. A call whose prompt exceeds the model's context window is
flagged (`over_window`): the real API would have refused it.

`"recorded"` is what the session really did: its own compactions at their places, with the
histories that replaced the old ones and, for an evo_magic session, its settings timeline
(every `policy`, `strategies`, `cache` and `prices` record from where it was written; its
every-call strategies run, rebuilt from the registry) with cache-aware decisions taken on the
usage the server reported. `[]` never compacts; `None` is evo_magic's default pipeline of the
policy in force; a list is those strategies (objects or specs such as "micro(keep_recent=5)").
Unless `policy`, `cache` or `prices` are given, every setting follows the recorded ones.

A file is data (`modules timeline`, `recording`): replay never imports or calls anything a
file names; a recorded strategy that is not registered is not rebuilt, and "recorded" is
skipped for that conversation with a warning (`trust=True` rebuilds it, for files you wrote).
Paths a record names are read only inside that session's folder.

Tokens are the whole prompt (system, tools and messages), calibrated per conversation on the
recorded usage (`calibration`). Summaries: recorded where a strategy summarises exactly what
the session summarised, else stand-ins of `summary_tokens`, or real ones from `summariser`
(cached on disk); each is priced as a call of its own (`summaries`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.replay.calibration import Calibration
from evo_magic.analysis.replay.recording import Recording, recordings
from evo_magic.analysis.replay.results import CALL_COLUMNS, Replay, summary_counts, totals
from evo_magic.analysis.replay.run import (
    RECORDED,
    ReplayedCall,
    ReplaySettings,
    ReplayWarning,
    Run,
    Skipped,
    warn_unrebuilt,
)
from evo_magic.analysis.replay.summaries import median_summary_tokens
from evo_magic.compact.base import Strategy
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import price_table
from evo_magic.measure import TokenRate
from evo_magic.models.base import Model
from evo_magic.prompt_cache import CacheSettings
from evo_magic.strategies.registry import make_strategy
from evo_magic.summariser import Summariser

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts

__all__ = [
    "CALL_COLUMNS",
    "RECORDED",
    "Recording",
    "Replay",
    "ReplayWarning",
    "ReplayedCall",
    "StrategySpec",
    "recordings",
    "replay",
]

StrategySpec = str | Sequence[Strategy | str] | None


def replay(
    source: str | Path | Transcripts,
    strategies: Mapping[str, StrategySpec],
    model: str | None = None,
    *,
    policy: CompactPolicy | None = None,
    prices: Any = None,
    cache: CacheSettings | None = None,
    summary_tokens: int | None = None,
    summariser: Model | Summariser | None = None,
    cache_dir: str | Path | None = None,
    trust: bool = False,
    on_call: Callable[[ReplayedCall], None] | None = None,
) -> Replay:
    """Replay what `source` recorded under each of `strategies` (see the module docstring).

    `source` is anything `load_transcripts` reads, or a `Transcripts`. `strategies` maps a label
    to "recorded", [] (never compact), None (the default pipeline), or a list of strategies or
    specs. `model` prices the calls (default: each conversation's recorded model); `policy` sets
    the limits strategies see, `cache` the prompt caching modelled and `prices` the price table
    (default for each: the session's recorded settings, else `CompactPolicy()`, caching on for 5
    minutes, the shipped prices). Summaries: recorded where they fit, else stand-ins of
    `summary_tokens`, or real ones from `summariser` (cached under `cache_dir`). `trust=True`
    rebuilds recorded strategies that are not registered by importing their class: only for
    files you wrote. `on_call`, when given, is called at every call of every strategy setting
    (not the calibration pass) with what would be sent (`ReplayedCall`).
    """
    import pandas as pd

    from evo_magic.analysis.transcripts import Transcripts, load_transcripts

    t = source if isinstance(source, Transcripts) else load_transcripts(Path(source).expanduser())
    settings = ReplaySettings(
        model=model,
        policy=policy,
        prices=None if prices is None else price_table(prices),
        cache=cache,
        stand_in_tokens=summary_tokens or _median_summary_tokens(t),
        summariser=summariser,
        cache_dir=Path(cache_dir).expanduser() if cache_dir else None,
        trust=trust,
        on_call=on_call,
    )
    resolved = {label: _strategies(spec) for label, spec in strategies.items()}
    rows: list[dict[str, Any]] = []
    used: list[dict[str, Any]] = []
    for recording in recordings(t):
        reference = Run(recording, "reference", RECORDED, settings, None)
        reference.run()
        calibration = Calibration(TokenRate.of(reference.points), reference.reference)
        for label, chosen in resolved.items():
            run = Run(recording, label, chosen, settings, calibration)
            try:
                rows += run.run()
            except Skipped as exc:
                warn_unrebuilt(recording.session_id, label, str(exc))
                continue
            for kind in run.summaries.used:
                used.append({"strategy": label, "kind": kind})
    calls = pd.DataFrame(rows, columns=CALL_COLUMNS)
    calls["over_window"] = calls["over_window"].astype("boolean")
    calls["context_window"] = calls["context_window"].astype("Int64")
    summaries = pd.DataFrame(used, columns=["strategy", "kind"])
    return Replay(calls, totals(calls, list(resolved)), summary_counts(summaries, list(resolved)))


def _strategies(spec: StrategySpec) -> list[Strategy] | str | None:
    """RECORDED for "recorded"; None for the default pipeline; else the list ([] for none)."""
    if spec == RECORDED:
        return RECORDED
    if spec is None:
        return None
    if isinstance(spec, str) or not isinstance(spec, Sequence):
        spec = [spec]  # one strategy (or spec) on its own
    return [make_strategy(item) for item in spec]


def _median_summary_tokens(t: Transcripts) -> int:
    chars = t.compactions["summary_chars"].dropna() if len(t.compactions) else []
    return median_summary_tokens(chars)
