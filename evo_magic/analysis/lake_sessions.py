"""A lake's sessions for a sweep in this process, read a batch at a time.

Reading each session from the lake on its own cost a Parquet read and a pandas conversion of
every frame per session (about 60 ms of per-column work for a hundred rows), most of a replay
over a lake. Here the sessions are taken in batches of up to `BATCH_BYTES` of source files
(as much as a lake's build reads at once, so memory stays that of one build batch): each
batch's frames are read and converted once, then each session is cut out of them by the
session index, as in memory. Only the batch in use is held.

A session's payload pickles as `(lake, session_id)`: a sweep on a pool or on Dask sends the
workers that, and each reads its own session as before (`sources.unit_session`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evo_magic.analysis import groups
from evo_magic.analysis.lake_transcripts import SESSION_FRAMES, LakeTranscripts
from evo_magic.analysis.session_index import SessionRows, cut

if TYPE_CHECKING:
    import pandas as pd

BATCH_BYTES = groups.BATCH_BYTES
"""The source files' size up to which sessions are read together."""
READ = SESSION_FRAMES
"""The frames read for a batch; `events` is read per session, only when asked for."""


@dataclass
class Batch:
    """One batch's frames, converted once, and the index of its sessions' rows."""

    number: int
    frames: dict[str, pd.DataFrame]
    rows: SessionRows = field(default_factory=SessionRows)


@dataclass(eq=False)
class LakeBatches:
    """The sessions of a lake in batches (see the module docstring). `reads` counts the
    batches read so far: one per batch when the sessions are asked for in order."""

    lake: LakeTranscripts
    order: list[list[str]]
    batch_of: dict[str, int]
    reads: int = 0
    _held: Batch | None = None

    @classmethod
    def of(
        cls, lake: LakeTranscripts, session_ids: list[str] | None = None, limit: int | None = None
    ) -> LakeBatches:
        """The lake's sessions (or `session_ids` of them) in order, in batches of up to
        `limit` (default `BATCH_BYTES`) bytes of source files (a session larger than that is
        a batch of its own)."""
        ids = lake.session_ids() if session_ids is None else session_ids
        order = list(groups.batches(ids, lake.index.source_bytes, limit or BATCH_BYTES))
        batch_of = {sid: n for n, ids in enumerate(order) for sid in ids}
        return cls(lake, order, batch_of)

    def session(self, session_id: str) -> Any:
        """The session's Transcripts, the same as `LakeTranscripts.session` gives (its events
        read only when asked for), cut out of its batch's frames."""
        number = self.batch_of.get(session_id)
        if number is None:
            raise KeyError(f"no session {session_id!r} in the lake {self.lake.lake}")
        batch = self._batch(number)
        frames = {name: cut(batch.rows, name, batch.frames[name], session_id) for name in READ}
        return self.lake.session(session_id, frames)

    def _batch(self, number: int) -> Batch:
        """Batch `number`, read now unless it is the one held (which it replaces)."""
        if self._held is not None and self._held.number == number:
            return self._held
        self._held = None  # the previous batch is freed before the next is read
        index = self.lake.index
        keys = index.keys(self.order[number])
        frames = {name: index.read(name, keys) for name in READ}
        self.reads += 1
        self._held = Batch(number, frames)
        return self._held


@dataclass(frozen=True, eq=False)
class LakeSession:
    """A sweep unit's payload: one session of a lake, read through its batch."""

    batches: LakeBatches
    session_id: str

    def read(self) -> Any:
        return self.batches.session(self.session_id)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process as the lake's folder and the session's id: it reads its own.
        return (tuple, ((str(self.batches.lake.lake), self.session_id),))
