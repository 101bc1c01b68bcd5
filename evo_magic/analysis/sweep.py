"""Sweeps: one pure function of a unit (a session), mapped over many units on an engine.

    result = run_sweep(units, work, engine="dask", workers=2, out="~/sweep", settings=described)
    result = run_sweep(units, work, engine=Engine("dask", workers=2, out="~/sweep"), ...)

`run_sweep` is `Engine.map` taking the engine as `replay` and `retention` take it: an `Engine`,
or its kind and options as keywords (explained once, on `evo_magic.analysis.engine.Engine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from evo_magic.analysis.engine import (
    ENGINES,
    Engine,
    EngineOptions,
    Outcome,
    SweepError,
    SweepResult,
    Unit,
    Work,
    engine_of,
)

__all__ = ["ENGINES", "Outcome", "SweepError", "SweepResult", "Unit", "run_sweep"]


def run_sweep(
    units: Sequence[Unit],
    work: Work,
    *,
    engine: Engine | str = "local",
    settings: str = "",
    **options: Unpack[EngineOptions],
) -> SweepResult:
    """Run `work(unit.payload)` for every unit on `engine` and gather the frames, in the order
    of the units (see `Engine.map`; a bad option is refused as `Engine` refuses it).

    `settings` describes what `work` computes (e.g. the strategies): an `out` folder written
    with other settings is refused rather than mixed.
    """
    return engine_of(engine, options, apart=True).map(units, work, settings=settings)
