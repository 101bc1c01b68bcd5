"""`experiment`: the same tasks under several strategies, with replicates, checked, on an engine.

    from evo_magic import experiment, tasks
    x = experiment(tasks.builtin(), strategies={"seed": "default", "window": ["sliding-window"]},
                   replicates=3, out="runs/")
    x.summary()

Every run gets a fresh copy of its task's workspace, its own session and transcript, and its
check after the agent stopped (`run.py`). Runs go in blocks of one task and replicate, the
strategies in a seeded order within each block, so that a rate limit or a drift of the model
hits every strategy alike. Each finished run is stored under `out` at once (the engine's
store: Parquet, then a marker, each written whole), so an interrupted experiment run again with
the same `out` runs only what is missing; `out/experiment.json` records the settings, the
strategies, the model, the seed, the package version and each task's workspace hash.
"""

from __future__ import annotations

import json
import math
import pickle
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from os import PathLike
from pathlib import Path
from typing import Any

from evo_magic.analysis.atomic import write_atomically
from evo_magic.analysis.engine import Engine, Outcome, Unit
from evo_magic.analysis.engine.store import Store
from evo_magic.compact.base import Strategy
from evo_magic.experiments.live import Shown
from evo_magic.experiments.results import Experiment
from evo_magic.experiments.run import COLUMNS, RunSpec, run_one
from evo_magic.experiments.task import Task, TaskError
from evo_magic.models import Model, resolve_model
from evo_magic.settings import SessionSettings
from evo_magic.strategies.registry import describe, make_strategy
from evo_magic.version import __version__

StrategySpec = str | Strategy | Sequence[str | Strategy] | None
DEFAULT = "default"
"""The spec of the seed's default pipeline (None means it too)."""


def experiment(
    suite: Task | Sequence[Task],
    strategies: Mapping[str, StrategySpec],
    replicates: int = 3,
    model: Model | str | None = None,
    engine: str = "local",
    workers: int = 2,
    out: str | PathLike[str] = "runs/",
    max_cost_usd: float | None = None,
    seed: int = 0,
    *,
    client: Any = None,
    settings: SessionSettings | Mapping[str, Any] | None = None,
) -> Experiment:
    """Run every task of `suite` under every strategy setting, `replicates` times, on `engine`
    ("local" processes, or "dask": a local cluster the engine starts, or `client=`), and
    return the `Experiment` (its `runs`, `summary()`, `frontier()`, `transcripts`).

    `strategies` maps a label to "default" (or None: the seed's pipeline), a spec ("micro",
    "sliding-window(keep=8)"), a strategy, or a list of those ([]: never compact); the first
    label is the reference of the paired differences. `model`: a model name, a `Model`, or
    None (Claude with a key, else the offline stand-in). `settings`: the sessions' settings
    (a `SessionSettings` or changes by name; the task's `max_turns` applies over them).

    Runs already stored under `out` (the same tasks, strategies, model, settings and seed) are
    read back, not run again. `max_cost_usd`: no run starts once the spend so far plus the
    runs in flight and this one (each estimated at the mean finished run) would pass it.
    KeyboardInterrupt: no new run starts, the running ones finish and are stored, then it is
    raised; run the same call again to resume. A run that fails is a row with `error`.
    """
    tasks = _suite(suite)
    resolved = _strategies(strategies)
    _check_numbers(replicates, workers, max_cost_usd, seed)
    chosen = Engine(engine, workers=workers, client=client, progress=False)
    values = _settings(settings)
    resolved_model = resolve_model(model)
    root = Path(out).expanduser()
    given = _for_workers(model, resolved_model)
    specs = _ordered(tasks, resolved, replicates, given, values, root, seed)
    if chosen.kind == "local" and workers > 1:
        _check_picklable(tasks)
    record = _record(tasks, resolved, resolved_model, values, seed)
    store = Store(root, json.dumps(record, sort_keys=True, default=repr))
    _write_record(root, record, replicates, chosen, max_cost_usd)
    x = Experiment(root, list(resolved), [s.key for s in specs], seed, resolved_model.name)
    todo = _reuse(x, specs, store)
    if not resolved_model.offline and todo:
        sys.stderr.write(_estimate(todo, resolved_model.name, values) + "\n")
    _run(x, todo, chosen, store, max_cost_usd)
    return x


def _for_workers(model: Model | str | None, resolved: Model) -> Model | str:
    """The model as the workers get it: a `Model` as given, else its name, never None (a
    worker without the key must fail, not fall back to the offline stand-in)."""
    return model if model is not None and not isinstance(model, str) else resolved.name


def _reuse(x: Experiment, specs: list[RunSpec], store: Store) -> list[RunSpec]:
    """The runs still to do: those `store` holds already are added to `x` as they were."""
    todo = []
    for spec in specs:
        if store.is_done(spec.key):
            x.add(spec.key, _stored_row(store, spec))
            x.reused += 1
        else:
            todo.append(spec)
    return todo


def _run(
    x: Experiment, todo: list[RunSpec], engine: Engine, store: Store, cap: float | None
) -> None:
    """Run `todo` on `engine`, storing and showing each run as it finishes."""
    shown = Shown(x)
    gate = _CostGate(cap, [r for r in x.runs["cost_usd"] if _number(r)])
    units = (Unit(spec.key, spec) for spec in gate.admitted(todo, x))
    try:
        for outcome in engine.stream(units, run_one):
            store.save(outcome)
            row = _row(outcome.frames) if outcome.frames else _failed(outcome, todo)
            x.add(outcome.key, row)
            gate.finished(row.get("cost_usd"))
            shown.changed()
    except KeyboardInterrupt:
        x.stopped = "interrupted"
        raise
    finally:
        x.finished = True
        shown.changed(final=True)


class _CostGate:
    """Whether one more run may start under the cap (see `experiment`)."""

    def __init__(self, cap: float | None, costs: list[float]) -> None:
        self.cap = cap
        self.costs = costs
        self.running = 0

    def admitted(self, todo: list[RunSpec], x: Experiment) -> Iterator[RunSpec]:
        for spec in todo:
            if not self.allows():
                x.stopped = "max_cost_usd"
                return
            self.running += 1
            yield spec

    def allows(self) -> bool:
        if self.cap is None:
            return True
        spent = sum(self.costs)
        each = spent / len(self.costs) if self.costs else 0.0
        return spent + each * (self.running + 1) <= self.cap

    def finished(self, cost: Any) -> None:
        self.running -= 1
        if _number(cost):
            self.costs.append(float(cost))


def _row(frames: Mapping[str, Any]) -> dict[str, Any]:
    """A stored or returned run's row, as a dict of its columns (checked: it is read back)."""
    frame = frames.get("runs")
    if frame is None or len(frame) != 1 or list(frame.columns) != list(COLUMNS):
        raise TaskError("a stored run is damaged; delete its folder under out= to run it again")
    row = frame.iloc[0].to_dict()
    plain = {name: getattr(value, "item", lambda v=value: v)() for name, value in row.items()}
    return {name: (None if _missing(value) else value) for name, value in plain.items()}


def _stored_row(store: Store, spec: RunSpec) -> dict[str, Any]:
    """The row stored for `spec`, checked to be that run's (a stored file is data)."""
    row = _row(store.load(spec.key))
    found = (row.get("task"), row.get("strategy"), row.get("replicate"))
    if found != (spec.task.name, spec.label, spec.replicate) or not isinstance(
        row.get("success"), bool
    ):
        raise TaskError(
            f"the stored run {spec.slug} under {spec.out} is not that run's row; delete its "
            "marker in done/ to run it again"
        )
    return row


def _failed(outcome: Outcome, todo: list[RunSpec]) -> dict[str, Any]:
    """The row of a run whose worker failed (it died, or the run could not start)."""
    spec = next(s for s in todo if s.key == outcome.key)
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        task=spec.task.name,
        strategy=spec.label,
        replicate=spec.replicate,
        success=False,
        score=0.0,
        check_output="",
        calls=0,
        peak_context_tokens=0,
        compactions=0,
        wall_s=math.nan,
        error=outcome.error,
    )
    return row


def _ordered(
    tasks: list[Task],
    strategies: dict[str, tuple[Strategy, ...] | None],
    replicates: int,
    model: Model | str | None,
    settings: SessionSettings,
    out: Path,
    seed: int,
) -> list[RunSpec]:
    """Every run, in blocks of (replicate, task), the strategies shuffled within each block
    by `seed`."""
    rng = random.Random(seed)
    labels = list(strategies)
    specs = []
    for replicate in range(replicates):
        for task in tasks:
            order = labels[:]
            rng.shuffle(order)
            specs += [
                RunSpec(task, label, strategies[label], replicate, model, settings, out)
                for label in order
            ]
    return specs


def _suite(suite: Any) -> list[Task]:
    tasks = [suite] if isinstance(suite, Task) else list(suite) if _sequence(suite) else None
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise TaskError("suite must be a Task or a non-empty list of Tasks")
    names = [t.name for t in tasks]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TaskError(f"every task of a suite needs its own name; repeated: {repeated[0]}")
    return tasks


def _strategies(strategies: Any) -> dict[str, tuple[Strategy, ...] | None]:
    if not isinstance(strategies, Mapping) or not strategies:
        raise TaskError("strategies must map at least one label to a strategy spec")
    resolved: dict[str, tuple[Strategy, ...] | None] = {}
    for label, spec in strategies.items():
        if not isinstance(label, str) or not label.strip():
            raise TaskError(f"a strategy label must be non-empty text, got {label!r}")
        if spec is None or spec == DEFAULT:
            resolved[label] = None
        elif isinstance(spec, str) or not _sequence(spec):
            resolved[label] = (make_strategy(spec),)
        else:
            resolved[label] = tuple(make_strategy(item) for item in spec)
    return resolved


def _check_numbers(replicates: Any, workers: Any, cap: Any, seed: Any) -> None:
    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not whole(replicates) or replicates < 1:
        raise TaskError(f"replicates must be a positive whole number, got {replicates!r}")
    if not whole(workers) or workers < 1:
        raise TaskError(f"workers must be a positive whole number, got {workers!r}")
    if cap is not None and not (_number(cap) and cap >= 0):
        raise TaskError(f"max_cost_usd must be a number of dollars (0 or more), got {cap!r}")
    if not whole(seed):
        raise TaskError(f"seed must be a whole number, got {seed!r}")


def _settings(settings: Any) -> SessionSettings:
    if settings is None:
        return SessionSettings()
    if isinstance(settings, SessionSettings):
        return settings
    if isinstance(settings, Mapping):
        return SessionSettings().with_changes(**settings)
    raise TaskError("settings must be a SessionSettings or a mapping of settings by name")


def _check_picklable(tasks: list[Task]) -> None:
    """A callable check travels to the worker processes: refuse one that cannot, at once."""
    for task in tasks:
        if callable(task.check):
            try:
                pickle.dumps(task.check)
            except Exception:
                raise TaskError(
                    f"Task {task.name}: its check cannot be sent to worker processes (a "
                    "lambda or a local function); use a module-level function, or workers=1"
                ) from None


def _record(
    tasks: list[Task],
    strategies: dict[str, tuple[Strategy, ...] | None],
    model: Model,
    settings: SessionSettings,
    seed: int,
) -> dict[str, Any]:
    """What the runs depend on: results stored under `out` with another record are refused."""
    return {
        "tasks": [task.describe() for task in tasks],
        "strategies": {
            label: DEFAULT if chosen is None else [describe(s) for s in chosen]
            for label, chosen in strategies.items()
        },
        "model": model.name,
        "settings": {f.name: repr(getattr(settings, f.name)) for f in fields(settings)},
        "seed": seed,
    }


def _write_record(
    root: Path, record: dict[str, Any], replicates: int, engine: Engine, cap: float | None
) -> None:
    whole = {
        **record,
        "replicates": replicates,
        "engine": engine.kind,
        "workers": engine.workers,
        "max_cost_usd": cap,
        "evo_magic_version": __version__,
    }
    text = json.dumps(whole, indent=1, sort_keys=True, default=repr)
    write_atomically(root / "experiment.json", text.encode())


def _estimate(todo: list[RunSpec], model: str, settings: SessionSettings) -> str:
    """A rough upper bound of what `todo` costs: every request using its `max_turns` calls
    with a prompt half the compaction limit and 1,000 output tokens."""
    from evo_magic.cost import call_cost, price_table
    from evo_magic.usage import Usage

    calls = sum(len(spec.task.turns) * spec.task.max_turns for spec in todo)
    prompt = settings.policy.context_limit // 2 // 4  # characters to tokens, about
    each = call_cost(Usage(input_tokens=prompt, output_tokens=1000), model, price_table(None))
    if each is None:
        return f"experiment: {len(todo)} runs of {model} (no price known: cost not estimated)"
    return (
        f"experiment: {len(todo)} runs of {model}, at most about ${each.total * calls:,.2f} "
        f"({calls:,} calls of ~{prompt:,} prompt tokens); max_cost_usd stops it earlier"
    )


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _number(value: Any) -> bool:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return numeric and math.isfinite(value)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
