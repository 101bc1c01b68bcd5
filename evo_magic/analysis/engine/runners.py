"""Where the units run: a pool of local worker processes, or Dask distributed. Each yields the
units' outcomes as they finish; a unit whose worker died is an outcome with its error."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from evo_magic.analysis.engine.base import Outcome, SweepError, Unit
from evo_magic.extras import missing

Call = Callable[[Unit], Outcome]


def locally(units: Iterable[Unit], call: Call, workers: int | None) -> Iterator[Outcome]:
    """`call` over `units` in `workers` processes (default: one per core); in this process
    when that is one. Units are drawn from `units` only as a worker is free, so a caller's
    iterable can stop handing them out (a spending cap); see `_drained` for an interrupt."""
    count = workers or os.cpu_count() or 1
    if isinstance(units, Sized):
        count = min(count, len(units))
    if count <= 1:
        for unit in units:
            yield call(unit)
        return
    # forkserver: a kernel's threads are not forked into the workers.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context(method))
    try:
        pool.submit(os.getpid).result()  # the workers start, or the sweep stops here, said once
    except BrokenProcessPool as exc:
        pool.shutdown(wait=True, cancel_futures=True)
        raise SweepError(_cannot_start(exc)) from exc
    running: dict[Future[Outcome], Unit] = {}
    source = iter(units)

    def finished() -> Iterator[tuple[Future[Outcome], Unit]]:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        return ((future, running.pop(future)) for future in list(done))

    try:
        yield from _drained(source, running, count, lambda unit: pool.submit(call, unit), finished)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _cannot_start(exc: BaseException) -> str:
    """Why the worker processes could not start, and what to do (one line)."""
    said = f"the sweep's worker processes could not start ({type(exc).__name__}: {exc})"
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if script is None:
        return f"{said}; give workers=1 to run the sweep in this process"
    return (
        f"{said}: each worker imports {Path(script).name} and runs its top level again. Put "
        'the code that starts the sweep under `if __name__ == "__main__":`, or give workers=1'
    )


def _drained(
    source: Iterator[Unit],
    running: dict[Any, Unit],
    count: int,
    submit: Callable[[Unit], Any],
    finished: Callable[[], Iterable[tuple[Any, Unit]]],
) -> Iterator[Outcome]:
    """Keep `count` units running, drawn from `source`; yield each outcome as it finishes.

    A unit that cannot be started (a pool broken by a worker that died) is an outcome with
    its error. A KeyboardInterrupt stops drawing units: the running ones finish and are
    yielded (so a store keeps them), then it is raised again; a second one stops waiting."""
    yield from _started(source, running, count, submit)
    interrupted = False
    while running:
        try:
            batch = list(finished())
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            continue
        for future, unit in batch:
            yield _outcome(future, unit)
            if not interrupted:
                yield from _started(source, running, 1, submit)
    if interrupted:
        raise KeyboardInterrupt


def _started(
    source: Iterator[Unit], running: dict[Any, Unit], wanted: int, submit: Callable[[Unit], Any]
) -> Iterator[Outcome]:
    """Start `wanted` more units from `source` (fewer when it ends), each added to `running`;
    a unit that cannot be started is an outcome with its error."""
    while wanted > 0 and (unit := next(source, None)) is not None:
        try:
            running[submit(unit)] = unit
            wanted -= 1
        except Exception as exc:
            yield Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")


def _outcome(future: Any, unit: Unit) -> Outcome:
    """A finished unit's outcome, or its error when the worker died or the result did not
    come back."""
    try:
        return future.result()
    except Exception as exc:  # the worker died, or the payload did not pickle
        return Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")


def on_dask(
    units: Iterable[Unit], call: Call, workers: int | None, client: Any
) -> Iterator[Outcome]:
    """`call` over `units` on `client` (a Client or a scheduler's address), else on a local
    cluster of `workers` processes (default 2) started here and closed after. Units are drawn
    as workers are free, as `locally` draws them."""
    from distributed import as_completed as dask_completed

    client, owned = _client(client, workers)
    slots = sum(client.nthreads().values()) or 1
    running: dict[Any, Unit] = {}
    completed = dask_completed()

    def submit(unit: Unit) -> Any:
        future = client.submit(call, unit, pure=False)
        completed.add(future)
        return future

    def finished() -> Iterator[tuple[Any, Unit]]:
        future = next(completed)
        return iter([(future, running.pop(future))])

    try:
        yield from _drained(iter(units), running, slots, submit, finished)
    finally:
        client.cancel(list(running))
        for thing in owned:
            thing.close()


def _client(client: Any, workers: int | None) -> tuple[Any, list[Any]]:
    """The Dask client to use, and what this sweep opened (to close after it): a cluster
    started here when no client is given (`start_cluster`: authenticated, without the
    session's credentials); the user's own client or address as it is (their trust)."""
    from evo_magic.analysis.engine.cluster import start_cluster

    if client is None:
        cluster = start_cluster(workers or 2)
        return cluster.client, [cluster]
    try:
        from distributed import Client
    except ImportError:
        raise SweepError(str(missing("Dask distributed", "engine='dask'", "dask"))) from None
    if isinstance(client, str):
        client = Client(client)
        return client, [client]
    return client, []
