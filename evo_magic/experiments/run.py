"""One run of an experiment: a task under one strategy setting, in its own copy of the
workspace, with its own session and transcript, then the check. The unit of work the engine
maps (a pure function of its `RunSpec`, so any engine gives the same row)."""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.compact.base import Strategy
from evo_magic.events import CompactionFinished, Event, ModelResponded
from evo_magic.experiments.task import Task
from evo_magic.models.base import Model
from evo_magic.settings import SessionSettings

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (
    "task",
    "strategy",
    "replicate",
    "success",
    "score",
    "check_output",
    "calls",
    "cost_usd",
    "peak_context_tokens",
    "compactions",
    "wall_s",
    "error",
    "session",
    "model_s",
    "check_s",
)
"""A run's row: the contract's columns, then the seconds spent in model calls and in the check
(`wall_s` less both is the experiment's own overhead)."""

_EXIT = re.compile(r"\n\[exit code: (\d+)\]$")


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs (picklable: it travels to a worker)."""

    task: Task
    label: str
    strategies: tuple[Strategy, ...] | None
    """None: the seed's default pipeline."""
    replicate: int
    model: Model | str | None
    settings: SessionSettings
    out: Path

    @property
    def key(self) -> str:
        return f"{self.task.name}\x00{self.label}\x00{self.replicate}"

    @property
    def slug(self) -> str:
        """The run's folder name: readable, and unique whatever the label holds."""
        label = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.label)[:40]
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:8]
        return f"{self.task.name}--{label}--r{self.replicate}--{digest}"


@dataclass
class _Meter:
    """What the session's events say about the run."""

    peak_tokens: int = 0
    compactions: int = 0
    model_s: float = 0.0

    def __call__(self, event: Event) -> None:
        if isinstance(event, ModelResponded):
            self.peak_tokens = max(self.peak_tokens, event.usage.context_tokens)
            self.model_s += event.duration
        elif isinstance(event, CompactionFinished) and event.success:
            self.compactions += 1


def run_one(spec: RunSpec) -> dict[str, pd.DataFrame]:
    """Run `spec` and return its row as the frame "runs" (a failure is a row with `error`)."""
    import pandas as pd

    _leave_interrupts_to_the_caller()
    started = time.perf_counter()
    folder = spec.out / "work" / spec.slug
    sessions = spec.out / "sessions"
    for stale in (folder, sessions / spec.slug):  # a run stopped halfway before: start afresh
        if stale.exists():
            shutil.rmtree(stale)
    workspace = folder / "workspace"
    shutil.copytree(spec.task.template, workspace, symlinks=True)
    meter = _Meter()
    row: dict[str, Any] = {"error": None, "calls": 0, "cost_usd": None, "session": None}
    try:
        _ask(spec, workspace, sessions, meter, row)
    except Exception as exc:
        row["error"] = f"agent: {type(exc).__name__}: {exc}"
    check_started = time.perf_counter()
    success, score, output, check_error = (False, 0.0, "", None)
    if row["error"] is None:
        success, score, output, check_error = run_check(spec.task, workspace, spec.settings)
        (folder / "check.txt").write_text(output, encoding="utf-8")
    finished = time.perf_counter()
    row.update(
        task=spec.task.name,
        strategy=spec.label,
        replicate=spec.replicate,
        success=bool(success),
        score=float(score),
        check_output=output,
        peak_context_tokens=meter.peak_tokens,
        compactions=meter.compactions,
        wall_s=finished - started,
        error=row["error"] or check_error,
        model_s=meter.model_s,
        check_s=finished - check_started,
    )
    return {"runs": pd.DataFrame([{name: row[name] for name in COLUMNS}])}


def _ask(
    spec: RunSpec, workspace: Path, sessions: Path, meter: _Meter, row: dict[str, Any]
) -> None:
    from evo_magic.session import Session

    settings = spec.settings.with_changes(max_turns=spec.task.max_turns)
    strategies = list(spec.strategies) if spec.strategies is not None else None
    with Session(
        workspace,
        model=spec.model,
        strategies=strategies,
        transcripts_root=sessions,
        session_id=spec.slug,
        settings=settings,
    ) as session:
        session.subscribe(meter)
        row["session"] = str(session.directory)
        try:
            for turn in spec.task.turns:
                session.ask(turn)
        finally:
            row["calls"] = session.calls
            row["cost_usd"] = session.cost_usd


def run_check(
    task: Task, workspace: Path, settings: SessionSettings
) -> tuple[bool, float, str, str | None]:
    """The task's check on `workspace`: (success, score, output, error). A command runs in the
    sandbox with the session's settings and the task's time limit; a callable is called with
    the folder. A check that cannot run, times out or raises is an error, never a success."""
    from evo_magic.tools import ToolError
    from evo_magic.tools.bash import run_command

    check = task.check
    if isinstance(check, str):
        try:
            output = run_command(
                check, workspace, task.check_timeout, settings.sandbox, set(), (), settings.bash
            )
        except ToolError as exc:
            why = [line for line in str(exc).splitlines() if line.strip()] or ["it failed"]
            return False, 0.0, str(exc), f"check: {why[-1].strip('[]')}"  # the reason ends it
        found = _EXIT.search(output)
        passed = found is not None and found.group(1) == "0"
        return passed, float(passed), output, None
    try:
        value = check(workspace)
    except Exception as exc:
        return False, 0.0, "", f"check: {type(exc).__name__}: {exc}"
    if isinstance(value, bool):
        return value, float(value), repr(value), None
    if isinstance(value, int | float) and 0 <= value <= 1:
        return value >= 1, float(value), repr(value), None
    return False, 0.0, repr(value), f"check: returned {value!r}, not a bool or a score in [0, 1]"


def _leave_interrupts_to_the_caller() -> None:
    """In a worker process, Ctrl-C is the experiment's to handle: it stops starting runs and
    lets the running ones finish (a terminal sends it to every process of the group)."""
    main_thread = threading.current_thread() is threading.main_thread()
    if multiprocessing.parent_process() is not None and main_thread:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
