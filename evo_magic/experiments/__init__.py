"""Live experiments: the same tasks under several strategies, with replicates, a success check
and intervals (`experiment`), a task (`Task`), and the built-in suite (`tasks.builtin()`)."""

from __future__ import annotations

from evo_magic.experiments import tasks
from evo_magic.experiments.experiment import experiment
from evo_magic.experiments.results import Experiment
from evo_magic.experiments.task import Task, TaskError

__all__ = ["Experiment", "Task", "TaskError", "experiment", "tasks"]
