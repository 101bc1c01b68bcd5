"""`rewind`: every strategy tried at the very points a recorded session compacted (or at given
calls), on the history exactly as the session had it there; what each kept, what compacting
cost, and what a reader still answers right after it."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evo_magic.analysis.atomic import id_name
from evo_magic.analysis.engine import Engine, engine_of, split_options
from evo_magic.analysis.replay import StrategySpec, recordings, stand_in_summary_tokens
from evo_magic.analysis.replay import _strategies as resolve_strategies
from evo_magic.analysis.replay.options import ReplaySettings
from evo_magic.analysis.retention.facts import Fact, as_fact
from evo_magic.analysis.retention.probes import Prober, default_cache_dir
from evo_magic.analysis.rewind.measure import Plan, rewound
from evo_magic.analysis.rewind.points import check_at
from evo_magic.analysis.rewind.results import FAILURE_COLUMNS, FRAMES, Rewind, frame
from evo_magic.analysis.sources import is_lake, session_units, transcripts_of, unit_session
from evo_magic.cost import price_table
from evo_magic.models import resolve_model
from evo_magic.models.base import Model

__all__ = ["Rewind", "rewind"]


def rewind(
    source: Any,
    strategies: Mapping[str, StrategySpec],
    at: str | list[int] = "compactions",
    facts: Any = None,
    reader: Model | str | None = None,
    replicates: int = 1,
    engine: Engine | str = "local",
    *,
    model: str | None = None,
    cache_dir: str | Path | None = None,
    **options: Any,
) -> Rewind:
    """Each of `strategies` applied at each point of every conversation of `source`.

    `source` is what `replay` reads; `strategies` maps a label to what `replay` takes
    ("recorded": what the session did there). `at`: "compactions" (each recorded compaction,
    the history just before it), a list of call numbers (the history just before each call),
    or "every N calls". At each point the history is rebuilt by replay under the session's
    recorded settings timeline and each strategy is applied by the live compactor; `points`
    has one row per point and strategy: sizes before and after, the summary's tokens and
    cost, the cost of the next call, the share of the facts kept by kind (`modified` files,
    `read` files, user `instruction`s verbatim, `error`s, `identifier`s) and the artifact
    trail (`modified_files`, `modified_named`).

    With a `reader` (a Model, "offline", a Claude model name, or a model pointed at any
    Anthropic-compatible server), summaries are written by it and cached on disk by
    (history, strategy's input, model) under `cache_dir`, and probes (recall, artifact,
    continuation, decision) are asked one question a request, `replicates` times each
    (`probes`; `probe_accuracy` with a Wilson interval). Without one, summaries are replay's
    stand-ins and no probe is asked. `facts`: None extracts them at each point (the kinds
    above); else a list of texts or `Fact`s (`evo_magic.analysis.retention`) used instead of
    the extracted ones, for the kept share and the recall probes (no artifact probe then;
    continuation and decision probes are asked as before), each counted at the points whose
    history held it before (a fact the conversation had not yet seen there is left out); the
    artifact trail stays the session's own. `engine` and its options (`workers`,
    `client`, `out`, `progress`) run the sessions one by one; every engine gives the same rows.
    """
    engine_options = _checked(options, replicates)
    given = _given(facts)
    checked = check_at(at)
    resolved = {label: resolve_strategies(spec) for label, spec in strategies.items()}
    t = transcripts_of(source)
    spec = _spec(t, strategies, checked, model, reader, replicates, cache_dir, given)
    chosen = engine_of(engine, engine_options, apart=is_lake(source))
    alone = chosen.workers == 1 or len(t.session_ids()) <= 1
    if chosen.kind == "local" and chosen.out is None and alone and not is_lake(t):
        frames = _measure(t, spec, resolved)  # nothing to share out: in this process
        return Rewind(frames["points"], frames["probes"], frame([], FAILURE_COLUMNS))
    if spec["reader"] is not None and (chosen.kind == "dask" or chosen.workers != 1):
        _check_picklable(spec["reader"])
    work = functools.partial(_measure_unit, spec=spec)
    return _gathered(chosen.map(session_units(t), work, settings=_settings(spec)))


def _gathered(swept: Any) -> Rewind:
    """The rewind of what the engine's units returned (an empty frame where none had rows)."""
    gathered = {
        name: swept.frames[name].astype(columns) if name in swept.frames else frame([], columns)
        for name, columns in FRAMES.items()
    }
    return Rewind(gathered["points"], gathered["probes"], swept.failures)


def _spec(
    t: Any,
    strategies: Mapping[str, StrategySpec],
    at: Any,
    model: str | None,
    reader: Model | str | None,
    replicates: int,
    cache_dir: str | Path | None,
    given: tuple[Fact, ...] | None,
) -> dict[str, Any]:
    """What every unit of the rewind is told (it travels to the workers as it is)."""
    return {
        "strategies": dict(strategies),
        "at": at,
        "model": model,
        "reader": None if reader is None else resolve_model(reader),
        "replicates": replicates,
        "facts": given,
        "cache_dir": str(Path(cache_dir).expanduser()) if cache_dir else str(default_cache_dir()),
        "summary_tokens": stand_in_summary_tokens(t),
    }


def _checked(options: dict[str, Any], replicates: Any) -> dict[str, Any]:
    """The engine's options among `options`; TypeError for any other keyword, ValueError for a
    replicate count that is not a whole number from 1."""
    engine_options, unknown = split_options(options)
    if unknown:
        raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
    if not isinstance(replicates, int) or replicates < 1:
        raise ValueError("replicates must be a whole number, at least 1")
    return engine_options


def _measure(
    t: Any, spec: Mapping[str, Any], resolved: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The frames of every conversation of `t`, in this process."""
    resolved = resolved or {label: resolve_strategies(s) for label, s in spec["strategies"].items()}
    reader = spec["reader"]
    cache = Path(spec["cache_dir"])
    model_dir = cache / "rewind-summaries" / id_name(reader.name if reader else "stand-in")
    settings = ReplaySettings(
        model=spec["model"],
        policy=None,
        prices=None,
        cache=None,
        stand_in_tokens=spec["summary_tokens"],
        summariser=reader,
        cache_dir=None if reader is None or getattr(reader, "offline", False) else model_dir,
    )
    prober = None if reader is None else Prober(reader, None, price_table(None), cache)
    plan = Plan(resolved, spec["at"], settings, prober, spec["replicates"], spec["facts"])
    points: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    # `recordings` cuts each session out by the frames' index (linear in the sessions).
    for recording in recordings(t):
        rows, asked = rewound(recording, plan)
        points += rows
        probes += asked
    return {
        name: frame(rows, columns)
        for (name, columns), rows in zip(FRAMES.items(), (points, probes), strict=True)
    }


def _given(facts: Any) -> tuple[Fact, ...] | None:
    """The given facts as `Fact`s (None: extract them), or a one-line error."""
    if facts is None:
        return None
    if isinstance(facts, (str, Fact)) or not isinstance(facts, (list, tuple)):
        raise TypeError(f"facts is a list of str or Fact, not {type(facts).__name__}")
    return tuple(as_fact(fact) for fact in facts)


def _measure_unit(payload: Any, *, spec: Mapping[str, Any]) -> dict[str, Any]:
    """One session's frames: the unit of work of a sweep."""
    return _measure(unit_session(payload), spec)


def _settings(spec: Mapping[str, Any]) -> str:
    from evo_magic.analysis.replay import sweep_settings

    described = {k: v for k, v in spec.items() if k not in ("strategies", "reader")}
    described["reader"] = None if spec["reader"] is None else spec["reader"].name
    return "rewind " + sweep_settings(spec["strategies"], described)


def _check_picklable(reader: Model) -> None:
    try:
        pickle.dumps(reader)
    except Exception as exc:
        raise ValueError(
            f"the reader {reader.name!r} cannot be sent to the sweep's workers ({exc}); give a "
            "model name, or engine='local' with workers=1"
        ) from exc
