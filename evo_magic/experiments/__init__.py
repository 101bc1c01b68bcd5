"""Live experiments: the same tasks under several strategies, with replicates, a success check
and intervals (`experiment`), a task (`Task`), and the built-in suite (`tasks.builtin()`).

Names are imported on first use, so that the notebook layer can watch experiments
(`live`) without loading the engine or pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["Experiment", "Task", "TaskError", "experiment", "tasks"]

_LAZY = {
    "Experiment": "evo_magic.experiments.results",
    "Task": "evo_magic.experiments.task",
    "TaskError": "evo_magic.experiments.task",
    "experiment": "evo_magic.experiments.launch",
}

if TYPE_CHECKING:
    from evo_magic.experiments import tasks  # noqa: F401
    from evo_magic.experiments.launch import experiment  # noqa: F401
    from evo_magic.experiments.results import Experiment  # noqa: F401
    from evo_magic.experiments.task import Task, TaskError  # noqa: F401


def __getattr__(name: str) -> Any:
    if name == "tasks":
        return import_module("evo_magic.experiments.tasks")
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'evo_magic.experiments' has no attribute {name!r}")
