"""The engine: where the units of a sweep run (here, in worker processes, or on Dask), as one
value that replay, retention and every other sweep take.

    from evo_magic import Engine, replay
    on_dask = Engine("dask", workers=2, out="~/evo-sweep")
    r = replay(t, strategies, engine=on_dask)
    r = replay(t, strategies, engine="dask", workers=2, out="~/evo-sweep")  # the same Engine

`Engine` is the one place the options are declared, validated and explained; a function that
takes an engine takes either an `Engine` or its options as keywords, and `engine_of` turns them
into one `Engine`. `Engine.map` runs a pure function of a unit over every unit (runners.py: the
local process pool and Dask), keeps the results under `out` (store.py) and shows its progress
(progress.py).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, fields
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, overload

from evo_magic.analysis.engine.base import (
    Frames,
    Outcome,
    SweepError,
    SweepWarning,
    Unit,
    Work,
    guarded,
)
from evo_magic.analysis.engine.cluster import LocalDaskCluster, start_cluster
from evo_magic.analysis.engine.progress import Progress
from evo_magic.analysis.engine.store import Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ENGINES",
    "Engine",
    "EngineOptions",
    "LocalDaskCluster",
    "Frames",
    "Outcome",
    "SweepError",
    "SweepResult",
    "SweepWarning",
    "Unit",
    "Work",
    "engine_of",
    "start_cluster",
    "split_options",
]

ENGINES = ("local", "dask")


@dataclass(frozen=True)
class Engine:
    """Where and how the units of a sweep run (a unit: one session, one run of an experiment).

    - `kind="local"` runs the units in `workers` processes on this machine (default: one per
      core; `workers=1`: in this process, one after another).
    - `kind="dask"` runs them on Dask distributed: on `client` (a `distributed.Client` or a
      scheduler address such as "tcp://scheduler:8786"; who can reach that cluster runs code
      in it: giving it is your trust decision), else on a local cluster of `workers`
      processes (default 2) started for the sweep and closed after it (`start_cluster`: TLS
      with credentials made for it, workers without the session's credentials). Dask's
      scheduler runs a unit again when its worker died. Dask is optional: the `dask` extra
      (from a checkout, `python -m pip install -e '.[dask]'`).
    - `out=DIR` keeps each unit's frames as Parquet as soon as it finishes, then a marker; the
      same sweep run again reads back what is done and runs only the rest, so an interrupted
      sweep resumes where it stopped. A folder holding the results of other settings is
      refused, not mixed. Unit ids are data: files are named by a hash of the id.
    - `progress` draws one line on standard error: units done, failed and left.

    Where a unit runs does not change what it gives: the work is a pure function of its unit,
    and the results are gathered in the order of the units, so every engine gives the same
    numbers. A unit whose work raises is a row of `failures`, never the end of the sweep.

    An option that breaks its rule is refused when the Engine is made, in one line that names
    the option and the rule (`SweepError`).
    """

    kind: str = "local"
    workers: int | None = None
    client: Any = None
    out: str | PathLike[str] | None = None
    """Kept as a `Path`, the user's home expanded."""
    progress: bool = True

    def __post_init__(self) -> None:
        _check(self.kind, self.workers, self.client, self.out, self.progress)
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out).expanduser())

    def map(self, units: Sequence[Unit], work: Work, *, settings: str = "") -> SweepResult:
        """`work(unit.payload)` for every unit, on this engine; the frames gathered in the order
        of the units.

        `work` must be picklable (a module-level function, or a `functools.partial` of one) and
        so must the payloads. `settings` describes what `work` computes (e.g. the strategies):
        an `out` folder written with other settings is refused rather than mixed.
        """
        keys = [unit.key for unit in units]
        if len(set(keys)) != len(keys):
            raise SweepError("every session of a sweep needs its own id; some ids repeat")
        store = Store(Path(self.out), settings) if self.out is not None else None
        prints = {unit.key: unit.fingerprint for unit in units}
        done = {
            unit.key
            for unit in units
            if store is not None and store.is_done(unit.key, unit.fingerprint)
        }
        todo = [unit for unit in units if unit.key not in done]
        meter = Progress(len(units), enabled=self.progress)
        meter.update(len(done), 0)
        outcomes = self._collect(todo, work, store, meter, len(done), prints)
        frames, failures = _gathered(keys, outcomes, store)
        if units and len(failures) == len(units):
            warnings.warn(
                f"none of the {len(units):,} sessions of this sweep gave a result (the first "
                f"failed with {failures['error'].iloc[0]}): its totals are empty, not zero; "
                "see .failures",
                SweepWarning,
                stacklevel=3,
            )
        return SweepResult(frames, failures, ran=len(todo), reused=len(done))

    def _collect(
        self,
        todo: list[Unit],
        work: Work,
        store: Store | None,
        meter: Progress,
        reused: int,
        prints: Mapping[str, str],
    ) -> dict[str, Outcome]:
        """Every unit's outcome as it comes, saved under `out` at once (with the unit's
        fingerprint); with a store only the errors are kept (a sweep larger than memory: the
        frames are read back at the end)."""
        outcomes: dict[str, Outcome] = {}
        failed = 0
        for outcome in self._outcomes(todo, work):
            if store is not None:
                store.save(outcome, prints[outcome.key])
                outcome = Outcome(outcome.key, None, outcome.error)
            outcomes[outcome.key] = outcome
            failed += outcome.error is not None
            meter.update(reused + len(outcomes) - failed, failed)
        meter.close()
        return outcomes

    def stream(self, units: Iterable[Unit], work: Work) -> Iterator[Outcome]:
        """`work(unit.payload)` for each unit, on this engine, each outcome as it finishes
        (nothing kept: the caller stores them). Units are drawn from `units` only as a worker
        is free, so the caller can stop handing them out (a spending cap). A KeyboardInterrupt
        stops drawing them: the running units finish and are yielded, then it is raised."""
        return self._outcomes(units, work)

    def _outcomes(self, units: Iterable[Unit], work: Work) -> Iterator[Outcome]:
        from evo_magic.analysis.engine.runners import locally, on_dask

        if isinstance(units, Sized) and not units:
            return iter(())
        call: Callable[[Unit], Outcome] = functools.partial(guarded, work)
        if self.kind == "dask":
            return on_dask(units, call, self.workers, self.client)
        return locally(units, call, self.workers)


OPTIONS = tuple(f.name for f in fields(Engine) if f.name != "kind")
"""The options given as keywords beside `engine=` (the kind)."""


class EngineOptions(TypedDict, total=False):
    """An `Engine`'s options given as keywords beside `engine=` (explained on `Engine`)."""

    workers: int | None
    client: Any
    out: str | PathLike[str] | None
    progress: bool


@overload
def engine_of(engine: Engine | str, options: Mapping[str, Any], *, apart: bool = ...) -> Engine: ...
@overload
def engine_of(
    engine: Engine | str | None, options: Mapping[str, Any], *, apart: bool = ...
) -> Engine | None: ...
def engine_of(
    engine: Engine | str | None, options: Mapping[str, Any], *, apart: bool = False
) -> Engine | None:
    """The one Engine that `engine=` and the option keywords beside it name.

    An `Engine` is taken as it is (options beside it are refused: an engine is one value); a
    kind ("local" or "dask") is made into an Engine with the options. No kind means no engine:
    the work runs whole, in this process (None), unless `out` is given or the source must be
    taken apart (`apart`: a lake, read one session at a time); then one unit at a time in this
    process (`workers=1`).
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r} (an engine's options: "
            f"{', '.join(OPTIONS)})"
        )
    if isinstance(engine, Engine):
        if options:
            raise SweepError(
                f"engine= is an Engine: give {', '.join(f'{o}=' for o in options)} in it, "
                "not beside it"
            )
        return engine
    if engine is None:
        if options.get("out") is None and not apart:
            return None
        return Engine("local", **{**options, "workers": 1})
    return Engine(engine, **options)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`options` parted into the engine's (`OPTIONS`) and the rest."""
    ours = {name: value for name, value in options.items() if name in OPTIONS}
    rest = {name: value for name, value in options.items() if name not in OPTIONS}
    return ours, rest


def _check(kind: Any, workers: Any, client: Any, out: Any, progress: Any) -> None:
    """Each option's rule, refused in one line naming the option."""
    if kind not in ENGINES:
        raise SweepError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {kind!r}")
    whole = isinstance(workers, int) and not isinstance(workers, bool)
    if workers is not None and not (whole and workers >= 1):
        raise SweepError(f"workers must be a positive whole number, got {workers!r}")
    if client is not None and kind != "dask":
        raise SweepError("client= is for engine='dask'")
    if out is not None and not isinstance(out, str | PathLike):
        raise SweepError(f"out must be a folder's path, got {out!r}")
    if not isinstance(progress, bool):
        raise SweepError(f"progress must be True or False, got {progress!r}")


@dataclass
class SweepResult:
    """The frames of every unit that finished, concatenated in the order of the units, and
    one row per unit that failed (`session_id`, `error`)."""

    frames: Frames
    failures: pd.DataFrame
    ran: int
    """Units run by this call (the others were read back from `out`)."""
    reused: int


def _gathered(
    keys: list[str], outcomes: Mapping[str, Outcome], store: Store | None
) -> tuple[Frames, pd.DataFrame]:
    """The frames of the units that finished (from the store when there is one), in the
    order of `keys`, and the failures."""
    import pandas as pd

    parts: dict[str, list[pd.DataFrame]] = {}
    failures = []
    for key in keys:
        outcome = outcomes.get(key)
        if outcome is not None and outcome.error is not None:
            failures.append({"session_id": key, "error": outcome.error})
            continue
        try:
            frames = store.load(key) if store is not None else outcomes[key].frames
        except SweepError as exc:  # damaged since it was checked: a row, not the end
            failures.append({"session_id": key, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for name, frame in (frames or {}).items():
            parts.setdefault(name, []).append(frame)
    gathered = {name: _concat(found) for name, found in parts.items()}
    return gathered, pd.DataFrame(failures, columns=["session_id", "error"])


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    filled = [frame for frame in frames if len(frame)]
    if not filled:
        return frames[0].iloc[0:0]
    return pd.concat(filled, ignore_index=True) if len(filled) > 1 else filled[0]
