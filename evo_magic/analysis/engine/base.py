"""What a sweep is made of: units of work, what each gave, and the error of a sweep that cannot
start."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Frames = dict[str, "pd.DataFrame"]
Work = Callable[[Any], Frames]
"""A pure function of a unit's payload: its frames by name."""


class SweepError(RuntimeError):
    """A sweep that cannot start: an engine option that breaks its rule, a missing extra, an
    `out` folder that holds the results of other settings."""


class SweepWarning(UserWarning):
    """A sweep that ran but whose result says less than it seems: no unit gave a result."""


@dataclass(frozen=True)
class Unit:
    """One unit of a sweep (a session, a run): its id (unique in the sweep), what `work` is
    given, and a fingerprint of its content: a result kept under `out` for the same id but
    another fingerprint (the session changed since) is not reused."""

    key: str
    payload: Any
    fingerprint: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one unit gave: its frames, or the error that stopped it."""

    key: str
    frames: Frames | None
    error: str | None = None


def guarded(work: Work, unit: Unit) -> Outcome:
    """`work` on one unit, its exception turned into a value (so one unit cannot stop the
    sweep, and the engine's retries are kept for workers that die)."""
    try:
        frames = work(unit.payload)
    except Exception as exc:
        return Outcome(unit.key, None, f"{type(exc).__name__}: {exc}")
    return Outcome(unit.key, dict(frames))
