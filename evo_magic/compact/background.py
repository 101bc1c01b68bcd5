"""A summary prepared off the critical path (`Summarise(background_at=...)`; Cline prepares
its summary at 60% of the window and swaps it in at 85%).

Before a call, once the context passes `background_at` of the session's limit, the compactor's
worker thread asks the session's summariser (the very function a foreground summary calls) for
a summary of a copy of the history as it is then. At the limit, the strategy takes it: when
the copy is still a prefix of the history (nothing it covered was edited since), the summary
stands for that prefix and the messages since are kept verbatim; else it is recomputed in the
foreground. Its tokens and cost count with the compaction that takes it, used or not. The
worker never touches the history: an error in it, or an interrupt while the compaction waits
for it, leaves the history as it was (an error: the summary is recomputed). A replay prepares
it at once (`CompactionServices.background` False): the same summary at the same call, in a
deterministic order.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from evo_magic.compact.attempt import Attempt
from evo_magic.compact.services import CompactionServices
from evo_magic.messages import Message
from evo_magic.summariser import Summary


@dataclass
class Job:
    """One summary being prepared: of `messages` (a copy of the history then)."""

    messages: tuple[Message, ...]
    focus: str | None
    done: threading.Event = field(default_factory=threading.Event)
    summary: Summary | None = None
    error: str | None = None


class Prepared:
    """The compactor's worker and the summary it prepares (one at a time)."""

    def __init__(self, services: CompactionServices):
        self._services = services
        self.job: Job | None = None

    def start(self, messages: Sequence[Message], focus: str | None = None) -> None:
        """Begin preparing a summary of `messages` (copied), unless one is under way."""
        if self.job is not None or not messages:
            return
        job = Job(tuple(copy.deepcopy(list(messages))), focus)
        self.job = job
        if not self._services.background:
            self._work(job)
            return
        threading.Thread(target=self._work, args=(job,), daemon=True).start()

    def due(self, strategies: Sequence[object], messages: Sequence[Message], share: float) -> None:
        """Start when the context is at `share` of its limit and an over-limit strategy
        prepares its summary at that share or less (`background_at`)."""
        marks = [at for s in strategies if (at := getattr(s, "background_at", None))]
        if marks and share >= min(marks):
            self.start(messages)

    def _work(self, job: Job) -> None:
        try:
            job.summary = self._services.summarise(job.messages, job.focus)
        except Exception as exc:  # kept for the compaction: it recomputes in the foreground
            job.error = f"{type(exc).__name__}: {exc}"
        finally:
            job.done.set()

    def take(self, messages: Sequence[Message], attempt: Attempt) -> tuple[str, int] | None:
        """The prepared summary's text and the messages it covers, when they are a prefix of
        `messages`; None (recompute) when none was prepared, it failed, or the history it
        covered changed. Waits for the worker; its summary's cost counts with `attempt`
        either way."""
        job = self.job
        if job is None:
            return None
        job.done.wait()  # an interrupt here leaves the job and the history as they are
        self.job = None
        if job.summary is None:
            return None
        attempt.add(job.summary)
        covered = len(job.messages)
        if covered > len(messages) or list(messages[:covered]) != list(job.messages):
            return None
        return job.summary.text, covered

    def forget(self) -> None:
        """Drop the job (the history was emptied); a worker still running finishes unheard."""
        self.job = None


def share_of_limit(chars: int, tokens: int, limit: int | None, token_limit: int | None) -> float:
    """How full the context is against the session's limit (the fuller of characters and,
    when set, tokens); 0 when there is no limit."""
    shares = [chars / limit] if limit else []
    if token_limit:
        shares.append(tokens / token_limit)
    return max(shares, default=0.0)
