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

import functools
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from evo_magic.analysis.engine import Engine, EngineOptions, engine_of
from evo_magic.analysis.replay.calibration import Calibration, Stretches
from evo_magic.analysis.replay.options import (
    RECORDED,
    ReplayedCall,
    ReplaySettings,
    ReplayWarning,
    Skipped,
    warn_unrebuilt,
)
from evo_magic.analysis.replay.recording import Recording, recorded_blocks, recordings
from evo_magic.analysis.replay.results import CALL_COLUMNS, Replay, summary_counts, totals
from evo_magic.analysis.replay.run import Run
from evo_magic.analysis.replay.summaries import median_summary_tokens
from evo_magic.analysis.sources import is_lake, session_units, transcripts_of, unit_session
from evo_magic.compact.base import Strategy
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import price_table, unpriced_notice
from evo_magic.measure import TokenRate
from evo_magic.models.base import Model
from evo_magic.prompt_cache import CacheSettings
from evo_magic.strategies.registry import describe, make_strategy
from evo_magic.summariser import Summariser

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.lake_transcripts import LakeTranscripts
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
    source: str | Path | Transcripts | LakeTranscripts,
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
    engine: Engine | str | None = None,
    **engine_options: Unpack[EngineOptions],
) -> Replay:
    """Replay what `source` recorded under each of `strategies` (see the module docstring).

    `source` is anything `load_transcripts` reads, a `Transcripts` or a Session. `strategies`
    maps a label to "recorded", [] (never compact), None (the default pipeline), or a list of
    strategies or specs. `model` prices the calls (default: each conversation's recorded model);
    `policy` sets the limits strategies see, `cache` the prompt caching modelled and `prices`
    the price table (default for each: the session's recorded settings, else `CompactPolicy()`,
    caching on for 5 minutes, the shipped prices). Summaries: recorded where they fit, else
    stand-ins of `summary_tokens`, or real ones from `summariser` (cached under `cache_dir`).
    `trust=True` rebuilds recorded strategies that are not registered by importing their class:
    only for files you wrote. `on_call`, when given, is called at every call of every strategy
    setting (not the calibration pass) with what would be sent (`ReplayedCall`).

    Many sessions: `engine` (an `Engine`, or its kind "local" or "dask" with its options
    `workers`, `client`, `out` and `progress` as keywords; all explained on `Engine`) replays
    them session by session, with the same numbers as without an engine; a session that fails
    is a row of `failures`. `out` without an engine, or a lake (`load_transcripts(...,
    lake=DIR)`), is replayed one session at a time in this process, the sessions read from the
    lake a batch at a time (`lake_sessions`: memory bounded by one batch).
    """
    chosen = engine_of(engine, engine_options, apart=is_lake(source))
    t = transcripts_of(source)
    options = {
        "model": model,
        "policy": policy,
        "prices": prices,
        "cache": cache,
        "summary_tokens": summary_tokens or stand_in_summary_tokens(t),
        "summariser": summariser,
        "cache_dir": cache_dir,
        "trust": trust,
    }
    if chosen is None:
        return _replay_here(t, strategies, _settings(options, on_call))
    if on_call is not None:
        raise ValueError("on_call cannot follow a replay that runs on an engine")
    return _replay_sweep(t, strategies, options, chosen)


def _settings(
    options: dict[str, Any], on_call: Callable[[ReplayedCall], None] | None
) -> ReplaySettings:
    """The `ReplaySettings` of `replay`'s options (the prices read, the folder expanded)."""
    prices, cache_dir = options["prices"], options["cache_dir"]
    return ReplaySettings(
        model=options["model"],
        policy=options["policy"],
        prices=None if prices is None else price_table(prices),
        cache=options["cache"],
        stand_in_tokens=options["summary_tokens"],
        summariser=options["summariser"],
        cache_dir=Path(cache_dir).expanduser() if cache_dir else None,
        trust=options["trust"],
        on_call=on_call,
    )


def _replay_here(
    t: Transcripts | LakeTranscripts,
    strategies: Mapping[str, StrategySpec],
    settings: ReplaySettings,
) -> Replay:
    """`replay` in this process, over every recording of `t`."""
    calls, summaries = _replayed_frames(t, strategies, settings)
    return Replay(calls, totals(calls, list(strategies)), summaries)


def _replayed_frames(
    t: Transcripts | LakeTranscripts,
    strategies: Mapping[str, StrategySpec],
    settings: ReplaySettings,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The calls of every recording of `t` under each setting, and the summaries they used
    (`Replay.calls` and `Replay.summaries`)."""
    import pandas as pd

    resolved = {label: _strategies(spec) for label, spec in strategies.items()}
    found = recordings(t)
    model = settings.model
    priced = [model] if model else [c.get("model") for r in found for c in r.calls.values()]
    if (notice := unpriced_notice(priced, settings.prices)) is not None:
        warnings.warn(notice, stacklevel=4)  # once for the replay: their costs are NA
    rows: list[dict[str, Any]] = []
    used: list[dict[str, Any]] = []
    for recording in found:
        _replay_recording(recording, resolved, settings, rows, used)
    calls = pd.DataFrame(rows, columns=CALL_COLUMNS)
    calls["over_window"] = calls["over_window"].astype("boolean")
    calls["context_window"] = calls["context_window"].astype("Int64")
    summaries = pd.DataFrame(used, columns=["strategy", "kind"])
    return calls, summary_counts(summaries, list(resolved))


def _replay_recording(
    recording: Recording,
    resolved: Mapping[str, list[Strategy] | str | None],
    settings: ReplaySettings,
    rows: list[dict[str, Any]],
    used: list[dict[str, Any]],
) -> None:
    """One conversation calibrated on its recorded run, then replayed under each setting: its
    calls added to `rows`, the kinds of summary it used to `used`."""
    encoded = recorded_blocks(recording)  # each recorded block encoded once for every run
    reference = Run(recording, "reference", RECORDED, settings, None, encoded)
    reference.run()
    pooled = TokenRate.of(reference.points)
    stretches = Stretches.fit(*reference.stretches, pooled)
    calibration = Calibration(pooled, reference.reference, stretches)
    for label, chosen in resolved.items():
        run = Run(recording, label, chosen, settings, calibration, encoded)
        try:
            rows += run.run()
        except Skipped as exc:
            warn_unrebuilt(recording.session_id, label, str(exc))
            continue
        used += ({"strategy": label, "kind": kind} for kind in run.summaries.used)


def _replay_sweep(
    t: Transcripts | LakeTranscripts,
    strategies: Mapping[str, StrategySpec],
    options: dict[str, Any],
    engine: Engine,
) -> Replay:
    """`replay` session by session on an engine: the same numbers, gathered in session order."""
    import pandas as pd

    order = list(strategies)
    work = functools.partial(_replay_session, strategies=dict(strategies), options=options)
    settings = sweep_settings(strategies, options)
    swept = engine.map(session_units(t), work, settings=settings)
    calls = swept.frames.get("calls", pd.DataFrame(columns=CALL_COLUMNS))
    counts = swept.frames.get("summaries")
    if counts is not None and len(counts):
        summed = counts.groupby("strategy", sort=False)[["recorded", "model", "stand-in"]].sum()
        summaries = summed.reindex(order, fill_value=0).reset_index()
    else:
        summaries = summary_counts(pd.DataFrame(columns=["strategy", "kind"]), order)
    return Replay(calls, totals(calls, order), summaries, swept.failures)


def _replay_session(
    payload: Transcripts | tuple[str, str],
    *,
    strategies: dict[str, StrategySpec],
    options: dict[str, Any],
) -> dict[str, pd.DataFrame]:
    """One session's replay: the unit of work of a sweep (see `session_units`); the sweep
    makes the totals of all sessions once."""
    t = unit_session(payload)
    options = {**options, "summary_tokens": options["summary_tokens"] or stand_in_summary_tokens(t)}
    calls, summaries = _replayed_frames(t, strategies, _settings(options, None))
    return {"calls": calls, "summaries": summaries}


def sweep_settings(strategies: Mapping[str, StrategySpec], options: dict[str, Any]) -> str:
    """What a sweep's results depend on, as text: results under `out` made with other
    settings are not mixed with these."""

    def spelled(spec: StrategySpec) -> Any:
        resolved = _strategies(spec)
        return spec if not isinstance(resolved, list) else [describe(s) for s in resolved]

    described = {label: spelled(spec) for label, spec in strategies.items()}
    settings = {"strategies": described, "options": sorted(options.items())}
    return json.dumps(settings, sort_keys=True, default=repr)


def _strategies(spec: StrategySpec) -> list[Strategy] | str | None:
    """RECORDED for "recorded"; None for the default pipeline; else the list ([] for none)."""
    if spec == RECORDED:
        return RECORDED
    if spec is None:
        return None
    if isinstance(spec, str) or not isinstance(spec, Sequence):
        spec = [spec]  # one strategy (or spec) on its own
    return [make_strategy(item) for item in spec]


def stand_in_summary_tokens(t: Transcripts | LakeTranscripts) -> int:
    """The size of a stand-in summary for `t`: its recorded summaries' median (the whole
    source's, so a sweep session by session gives what one replay gives)."""
    chars = t.compactions["summary_chars"].dropna() if len(t.compactions) else []
    return median_summary_tokens(chars)
