"""What replay, retention and the other measures over recordings are given: a source made into
Transcripts, and its sessions as the units of a sweep (and back).

A unit's payload is the session's own Transcripts, or, for a lake, the lake's folder and the
session's id: the worker reads its session from the lake, so the sweep's caller never holds
the whole lake."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.engine import Unit

if TYPE_CHECKING:
    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts


def transcripts_of(source: Any) -> Transcripts | LakeTranscripts:
    """`source` as Transcripts: Transcripts (of a lake too) as they are, a Session's own
    transcript, else what `load_transcripts` reads at the path."""
    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts, load_transcripts

    if isinstance(source, Transcripts | LakeTranscripts):
        return source
    directory = getattr(source, "directory", None)  # a Session: its own transcript
    if directory is not None and hasattr(source, "transcript_path"):
        return load_transcripts(Path(directory))
    return load_transcripts(Path(source).expanduser())


def is_lake(source: object) -> bool:
    """Whether `source` is a lake's Transcripts (read one session at a time)."""
    from evo_magic.analysis.lake_transcripts import LakeTranscripts

    return isinstance(source, LakeTranscripts)


def session_units(t: Transcripts | LakeTranscripts) -> list[Unit]:
    """One unit per session of `t`, keyed by the session's id."""
    from evo_magic.analysis.lake_transcripts import LakeTranscripts

    if isinstance(t, LakeTranscripts):
        return [Unit(sid, (str(t.lake), sid)) for sid in t.session_ids()]
    return [Unit(sid, t.session(sid)) for sid in t.session_ids()]


def unit_session(payload: Transcripts | tuple[str, str]) -> Transcripts:
    """The session a unit's payload stands for (read from its lake when it names one)."""
    if not isinstance(payload, tuple):
        return payload
    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts

    lake, session_id = payload
    return LakeTranscripts(lake, Transcripts).session(session_id)
