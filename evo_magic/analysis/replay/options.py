"""What a replay is asked for and what it says back, the same for every run of it: the settings
(`ReplaySettings`), the strategy setting of a run (`Chosen`, `RECORDED`), what an observer
sees at each call (`ReplayedCall`), and how a setting that cannot run is skipped (`Skipped`,
`ReplayWarning`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo_magic.compact.base import Strategy
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import PriceTable
from evo_magic.events import Event
from evo_magic.models.base import Model
from evo_magic.prompt_cache import CacheSettings
from evo_magic.summariser import Summariser

RECORDED = "recorded"


class ReplayWarning(UserWarning):
    """Something replay could not do as asked (a recorded strategy it will not rebuild)."""


class Skipped(Exception):
    """This conversation cannot be replayed under this setting; the message says why."""


@dataclass(frozen=True)
class ReplayedCall:
    """One call of one replayed conversation, as an observer (`replay(on_call=...)`) sees it."""

    strategy: str
    session_id: str
    agent_id: str | None
    call: int | None
    messages: Sequence[dict[str, Any]]
    """What the model would read, after the strategies ran (the system prompt aside): what
    would be sent, after the modelled server's edits under server strategies. Read-only and
    valid during the callback only; unchanged messages are the same dicts from call to call."""
    changes: tuple[Event, ...]
    """What compacted since the previous call, in order: `MicroCompacted` and successful
    `CompactionFinished` events (a recorded compaction replayed as recorded: strategy
    "recorded")."""


@dataclass
class ReplaySettings:
    """What `replay` was asked for, the same for every run. `policy`, `cache` and `prices`
    None: each conversation's recorded ones (else evo_magic's defaults)."""

    model: str | None
    policy: CompactPolicy | None
    prices: PriceTable | None
    cache: CacheSettings | None
    stand_in_tokens: int
    summariser: Model | Summariser | None
    cache_dir: Path | None
    trust: bool = False
    on_call: Callable[[ReplayedCall], None] | None = None


Chosen = list[Strategy] | None | str
"""RECORDED, None (the default pipeline of the policy in force) or a list of strategies."""


def warn_unrebuilt(session_id: str, label: str, reason: str) -> None:
    """Say once that a setting of a conversation was skipped."""
    warnings.warn(
        f"replay: {label!r} of session {session_id} skipped: {reason}",
        ReplayWarning,
        stacklevel=3,
    )
