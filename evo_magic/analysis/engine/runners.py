"""Where the units run: a pool of local worker processes, or Dask distributed. Each yields the
units' outcomes as they finish; a unit whose worker died is an outcome with its error."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from evo_magic.analysis.engine.base import Outcome, SweepError, Unit
from evo_magic.extras import missing

Call = Callable[[Unit], Outcome]


def locally(units: list[Unit], call: Call, workers: int | None) -> Iterator[Outcome]:
    """`call` over `units` in `workers` processes (default: one per core); in this process
    when that is one."""
    count = min(workers or os.cpu_count() or 1, len(units))
    if count == 1:
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


def on_dask(units: list[Unit], call: Call, workers: int | None, client: Any) -> Iterator[Outcome]:
    """`call` over `units` on `client` (a Client or a scheduler's address), else on a local
    cluster of `workers` processes (default 2) started here and closed after."""
    from distributed import as_completed as dask_completed

    client, owned = _client(client, workers)
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
