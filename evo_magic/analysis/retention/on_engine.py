"""Retention measured session by session on an engine (replay's sweep, with retention's work):
each session's frames concatenated in session order, the same numbers as one measure."""

from __future__ import annotations

import functools
import pickle
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.engine import Engine
from evo_magic.analysis.replay import CALL_COLUMNS as REPLAY_COLUMNS
from evo_magic.analysis.replay import stand_in_summary_tokens, sweep_settings
from evo_magic.analysis.retention.measure import FRAMES, Measure, measure
from evo_magic.analysis.retention.results import frame, records
from evo_magic.analysis.sources import session_units, unit_session
from evo_magic.models.base import Model

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts


def measure_sessions(
    t: Transcripts | LakeTranscripts, spec: Measure, engine: Engine
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """`measure` of every session of `t` on `engine`: the frames, and the sessions that
    failed. A reader or judge that cannot go to the workers is refused before any runs."""
    import pandas as pd

    if engine.kind == "dask" or engine.workers != 1:
        for role, model in (("reader", spec.reader), ("judge", spec.judge)):
            _check_picklable(role, model)
    # The stand-in summary size is the median over the whole source, as without an engine.
    tokens = spec.options.get("summary_tokens") or stand_in_summary_tokens(t)
    spec = replace(spec, options={**spec.options, "summary_tokens": tokens})
    work = functools.partial(_measure_session, spec=spec)
    swept = engine.map(session_units(t), work, settings=_settings(spec))
    frames = {
        name: frame(records(swept.frames[name]) if name in swept.frames else [], columns)
        for name, columns in FRAMES.items()
    }
    replayed = swept.frames.get("replayed", pd.DataFrame(columns=REPLAY_COLUMNS))
    return {**frames, "replayed": replayed}, swept.failures


def _settings(spec: Measure) -> str:
    """What the sweep's results depend on: replay's settings and retention's own."""
    described: dict[str, Any] = {
        **spec.options,
        "retention": {
            "facts": None if spec.given is None else [repr(f) for f in spec.given],
            "reader": None if spec.reader is None else spec.reader.name,
            "judge": None if spec.judge is None else spec.judge.name,
            "replicates": spec.replicates,
        },
    }
    return sweep_settings(spec.strategies, described)


def _measure_session(
    payload: Transcripts | tuple[str, str], *, spec: Measure
) -> dict[str, pd.DataFrame]:
    """One session's measure: the unit of work of a sweep (see `session_units`)."""
    return measure(unit_session(payload), spec)


def _check_picklable(role: str, model: Model | None) -> None:
    """A model object sent to the workers must pickle: say which one does not, and why."""
    if model is None:
        return
    try:
        pickle.dumps(model)
    except Exception as exc:
        raise ValueError(
            f"the {role} {model.name!r} cannot be sent to the sweep's workers "
            f"({type(exc).__name__}: {exc}); give a model name, or a model that pickles "
            f"(e.g. a FunctionModel of a module-level function), or run without an engine"
        ) from exc
