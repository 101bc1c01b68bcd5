"""Sweeps: one pure function of a session, mapped over many sessions, here or on Dask.

The unit of work is a session: `work(payload)` returns DataFrames by name and depends on nothing
but its payload, so where it runs does not change what it returns. The frames are gathered in
the order of the units, not of completion, so every engine gives the same result.

- `engine="local"` runs the sessions in worker processes on this machine (`workers=1`: in this
  process, one after another).
- `engine="dask"` runs them on Dask distributed: on the `client=` given (a `distributed.Client`
  or a scheduler address), else on a local cluster of `workers` processes started for the sweep
  and closed after it. Dask's scheduler retries a session whose worker died.

With `out=DIR` each session's frames are written as Parquet as soon as it finishes, and a marker
is written last; a rerun with the same settings reads back what is done and runs only the rest,
so an interrupted sweep resumes where it stopped. A session whose work raises is a row of
`failures` (its id and the error), never the end of the sweep.

Session ids are data: files under `out` are named by a hash of the id, never by the id itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from evo_magic.analysis.atomic import id_name, write_atomically, write_parquet_atomically

if TYPE_CHECKING:
    import pandas as pd

ENGINES = ("local", "dask")
FORMAT_VERSION = 1

Frames = dict[str, "pd.DataFrame"]
Work = Callable[[Any], Frames]


class SweepError(RuntimeError):
    """A sweep that cannot start: an unknown engine, a missing extra, an `out` folder that
    holds the results of other settings."""


@dataclass(frozen=True)
class Unit:
    """One session of a sweep: its id (unique in the sweep) and what `work` is given."""

    key: str
    payload: Any


@dataclass(frozen=True)
class Outcome:
    """What one session gave: its frames, or the error that stopped it."""

    key: str
    frames: Frames | None
    error: str | None = None


@dataclass
class SweepResult:
    """The frames of every session that finished, concatenated in the order of the units, and
    one row per session that failed (`session_id`, `error`)."""

    frames: Frames
    failures: pd.DataFrame
    ran: int
    """Sessions run by this call (the others were read back from `out`)."""
    reused: int


def run_sweep(
    units: Sequence[Unit],
    work: Work,
    *,
    engine: str = "local",
    workers: int | None = None,
    client: Any = None,
    out: str | Path | None = None,
    settings: str = "",
    progress: bool = True,
) -> SweepResult:
    """Run `work(unit.payload)` for every unit on `engine` and gather the frames.

    `work` must be picklable (a module-level function, or a `functools.partial` of one) and so
    must the payloads. `settings` describes what `work` computes (e.g. the strategies): an `out`
    folder written with other settings is refused rather than mixed. `progress` shows sessions
    done, failed and left on standard error.
    """
    import pandas as pd

    if engine not in ENGINES:
        raise SweepError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise SweepError(f"workers must be a positive whole number, got {workers!r}")
    if client is not None and engine != "dask":
        raise SweepError("client= is for engine='dask'")
    keys = [unit.key for unit in units]
    if len(set(keys)) != len(keys):
        raise SweepError("every session of a sweep needs its own id; some ids repeat")
    store = _Store(Path(out).expanduser(), settings) if out is not None else None
    done = {unit.key for unit in units if store and store.is_done(unit.key)}
    todo = [unit for unit in units if unit.key not in done]
    meter = _Progress(len(units), enabled=progress)
    meter.update(len(done), 0)
    results: dict[str, Outcome] = {}
    failed = 0
    for outcome in _outcomes(todo, work, engine, workers, client):
        if store is not None:
            store.save(outcome)
        # With a store the frames are read back at the end: a sweep larger than memory
        # keeps only the failures while it runs.
        kept = outcome if store is None else Outcome(outcome.key, None, outcome.error)
        results[outcome.key] = kept
        failed += outcome.error is not None
        meter.update(len(done) + len(results) - failed, failed)
    meter.close()
    parts: dict[str, list[pd.DataFrame]] = {}
    failures = []
    for key in keys:
        outcome = results.get(key)
        if outcome is not None and outcome.error is not None:
            failures.append({"session_id": key, "error": outcome.error})
            continue
        frames = store.load(key) if store is not None else outcome.frames  # type: ignore[union-attr]
        for name, frame in (frames or {}).items():
            parts.setdefault(name, []).append(frame)
    frames = {name: _concat(found) for name, found in parts.items()}
    failures_frame = pd.DataFrame(failures, columns=["session_id", "error"])
    return SweepResult(frames, failures_frame, ran=len(todo), reused=len(done))


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    filled = [frame for frame in frames if len(frame)]
    if not filled:
        return frames[0].iloc[0:0]
    return pd.concat(filled, ignore_index=True) if len(filled) > 1 else filled[0]


def _guarded(work: Work, unit: Unit) -> Outcome:
    """`work` on one unit, its exception turned into a value (so one session cannot stop the
    sweep, and the engine's retries are kept for workers that die)."""
    try:
        frames = work(unit.payload)
    except Exception as exc:
        return Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")
    return Outcome(unit.key, dict(frames))


def _outcomes(
    units: list[Unit], work: Work, engine: str, workers: int | None, client: Any
) -> Iterator[Outcome]:
    if not units:
        return iter(())
    call = functools.partial(_guarded, work)
    if engine == "dask":
        return _on_dask(units, call, workers, client)
    return _locally(units, call, workers)


def _locally(
    units: list[Unit], call: Callable[[Unit], Outcome], workers: int | None
) -> Iterator[Outcome]:
    count = min(workers or os.cpu_count() or 1, len(units))
    if count == 1:
        for unit in units:
            yield call(unit)
        return
    # forkserver: a kernel's threads are not forked into the workers.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context(method))
    futures = {pool.submit(call, unit): unit for unit in units}
    try:
        for future in as_completed(futures):
            unit = futures[future]
            try:
                yield future.result()
            except Exception as exc:  # the worker died, or the payload did not pickle
                yield Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _on_dask(
    units: list[Unit], call: Callable[[Unit], Outcome], workers: int | None, client: Any
) -> Iterator[Outcome]:
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError as exc:
        raise SweepError(
            "engine='dask' needs Dask distributed: pip install 'evo-magic[dask]'"
        ) from exc
    owned: list[Any] = []
    if client is None:
        cluster = LocalCluster(
            n_workers=workers or 2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
        owned = [client, cluster]
    elif isinstance(client, str):
        client = Client(client)
        owned = [client]
    futures = client.map(call, units, pure=False)
    by_key = {future.key: unit for future, unit in zip(futures, units, strict=True)}
    try:
        for future in dask_completed(futures):
            unit = by_key[future.key]
            try:
                yield future.result()
            except Exception as exc:  # KilledWorker after the scheduler's retries
                yield Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")
    finally:
        client.cancel(futures)
        for thing in owned:
            thing.close()


class _Store:
    """Results under `out`: `<frame>/<id hash>.parquet` per session and frame, then a marker in
    `done/` (or `failed/`) written last; `sweep.json` says which settings they are for."""

    def __init__(self, root: Path, settings: str):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        manifest = root / "sweep.json"
        fingerprint = hashlib.sha256(settings.encode()).hexdigest()
        if manifest.is_file():
            try:
                found = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SweepError(f"{manifest} is not a sweep manifest ({exc})") from exc
            if not isinstance(found, dict) or found.get("settings") != fingerprint:
                raise SweepError(
                    f"{root} holds a sweep of other settings (strategies or options); give "
                    "another out= folder, or delete this one to start afresh"
                )
        else:
            write_atomically(
                manifest,
                json.dumps({"version": FORMAT_VERSION, "settings": fingerprint}).encode(),
            )
        self.done = root / "done"
        self.failed = root / "failed"
        self.done.mkdir(exist_ok=True)
        self.failed.mkdir(exist_ok=True)

    def is_done(self, key: str) -> bool:
        return (self.done / f"{id_name(key)}.json").is_file()

    def save(self, outcome: Outcome) -> None:
        name = id_name(outcome.key)
        if outcome.error is not None:
            record = {"session_id": outcome.key, "error": outcome.error}
            write_atomically(self.failed / f"{name}.json", json.dumps(record).encode())
            return
        import pyarrow as pa

        written = []
        for frame_name, frame in (outcome.frames or {}).items():
            if not frame_name.isidentifier():
                raise SweepError(f"a frame's name must be an identifier, got {frame_name!r}")
            folder = self.root / frame_name
            folder.mkdir(exist_ok=True)
            table = pa.Table.from_pandas(frame, preserve_index=False)
            write_parquet_atomically(table, folder / f"{name}.parquet")
            written.append(frame_name)
        record = {"session_id": outcome.key, "frames": written}
        write_atomically(self.done / f"{name}.json", json.dumps(record).encode())
        (self.failed / f"{name}.json").unlink(missing_ok=True)

    def load(self, key: str) -> Frames:
        import pandas as pd

        name = id_name(key)
        record = json.loads((self.done / f"{name}.json").read_text(encoding="utf-8"))
        return {
            frame: pd.read_parquet(self.root / frame / f"{name}.parquet")
            for frame in record["frames"]
            if str(frame).isidentifier()
        }


class _Progress:
    """One line on standard error: sessions done, failed and left. Redrawn in place on a
    terminal or in a notebook (at most 5 times a second), a new line every 10 s in a log."""

    def __init__(self, total: int, *, enabled: bool, stream: TextIO | None = None):
        self.total = total
        self.enabled = enabled and total > 0
        self.stream = stream or sys.stderr
        self.live = _is_live(self.stream)
        self.last = 0.0
        self.text = ""

    def update(self, done: int, failed: int) -> None:
        if not self.enabled:
            return
        left = self.total - done - failed
        self.text = (
            f"sweep: {done:,} of {self.total:,} sessions done, {failed:,} failed, {left:,} left"
        )
        now = time.monotonic()
        if now - self.last < (0.2 if self.live else 10.0) and left:
            return
        self.last = now
        self.stream.write(f"\r{self.text}" if self.live else f"{self.text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.live:
            self.stream.write(f"\r{self.text}\n")
            self.stream.flush()


def _is_live(stream: TextIO) -> bool:
    if "ipykernel" in sys.modules:  # a notebook's stream honours the carriage return
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
