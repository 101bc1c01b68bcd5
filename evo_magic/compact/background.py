"""A summary prepared off the critical path (`Summarise(background_at=...)`; Cline prepares
its summary at 60% of the window and swaps it in at 85%).

Before a call, once the context passes `background_at` of the session's limit, the compactor's
worker thread asks the session's summariser (the very function a foreground summary calls) for
a summary of a copy of the history as it is then. At the limit, the strategy takes it: when
the copy is still a prefix of the history (nothing it covered was edited since), the summary
stands for that prefix and the messages since are kept verbatim; else it is recomputed in the
foreground. Its tokens and cost count with the compaction that takes it, used or not. A
summary no compaction takes (the limit was never reached before the session closed, or the
history was emptied) is charged on a record of its own when the session closes or at the call
after the reset (`settle`): a failed `CompactionFinished` with trigger "background" holding its
usage and cost, so the recorded costs add up to what the session spent. The worker never
touches the history: an error in it, or an interrupt while the compaction waits for it, leaves
the history as it was (an error: the summary is recomputed; an interrupt: the next compaction
takes it). A replay prepares it at once (`CompactionServices.background` False): the same
summary at the same call, in a deterministic order.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from evo_magic.compact.attempt import Attempt
from evo_magic.compact.services import CompactionServices
from evo_magic.measure import ContextSize
from evo_magic.messages import Message
from evo_magic.summariser import Summary

UNUSED = "the summary prepared in the background was not used: no compaction took it"
"""The reason on the record that charges a prepared summary no compaction took."""


@dataclass
class Job:
    """One summary being prepared: of `messages` (a copy of the history then)."""

    messages: tuple[Message, ...]
    focus: str | None
    strategy: str = "summarise"
    """The strategy it was prepared for (its record names it)."""
    done: threading.Event = field(default_factory=threading.Event)
    summary: Summary | None = None
    error: str | None = None


class Prepared:
    """The compactor's worker and the summary it prepares (one at a time)."""

    def __init__(self, services: CompactionServices):
        self._services = services
        self.job: Job | None = None
        self.dropped: list[Job] = []
        """Jobs no compaction will take (the history was emptied): charged by `settle`."""

    def start(
        self, messages: Sequence[Message], focus: str | None = None, strategy: str = "summarise"
    ) -> None:
        """Begin preparing a summary of `messages` (copied), unless one is under way."""
        if self.job is not None or not messages:
            return
        job = Job(tuple(copy.deepcopy(list(messages))), focus, strategy)
        self.job = job
        if not self._services.background:
            self._work(job)
            return
        threading.Thread(target=self._work, args=(job,), daemon=True).start()

    def due(self, strategies: Sequence[object], messages: Sequence[Message], share: float) -> None:
        """Start when the context is at `share` of its limit and an over-limit strategy
        prepares its summary at that share or less (`background_at`)."""
        marks = [(at, s.name) for s in strategies if (at := getattr(s, "background_at", None))]
        if marks and share >= min(marks)[0]:
            self.start(messages, strategy=min(marks)[1])

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
        """Drop the job (the history was emptied): no compaction takes it; `settle` charges
        it once it is done."""
        if self.job is not None:
            self.dropped.append(self.job)
        self.job = None

    def settle(self, size: ContextSize, closing: bool = False) -> None:
        """Charge on a record of its own each summary prepared that no compaction will take:
        the dropped jobs done by now, and, `closing` (the session closes), the job under way
        too, waited for, and every dropped one."""
        if closing:
            self.forget()
        waiting = []
        for job in self.dropped:
            if closing:
                job.done.wait()  # an interrupt here leaves the rest for the next settle
            if not job.done.is_set():
                waiting.append(job)
            elif job.summary is not None:
                attempt = Attempt(job.strategy, "over_limit", "background", job.focus, size)
                attempt.add(job.summary)
                self._services.emit(attempt.failed(UNUSED, None))
        self.dropped = waiting


def share_of_limit(chars: int, tokens: int, limit: int | None, token_limit: int | None) -> float:
    """How full the context is against the session's limit (the fuller of characters and,
    when set, tokens); 0 when there is no limit."""
    shares = [chars / limit] if limit else []
    if token_limit:
        shares.append(tokens / token_limit)
    return max(shares, default=0.0)
