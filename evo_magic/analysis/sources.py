"""What replay, retention and the other measures over recordings are given: a source made into
Transcripts, and its sessions as the units of a sweep (and back).

A unit's payload is the session's own Transcripts, or, for a lake, a `LakeSession`: in this
process it is cut out of its batch of sessions, read at once (`lake_sessions`); sent to another
process it is the lake's folder and the session's id, and the worker reads its session from the
lake. Either way the sweep's caller never holds the whole lake."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.engine import Unit

if TYPE_CHECKING:
    from evo_magic.analysis.lake_sessions import LakeSession
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
    """One unit per session of `t`, keyed by the session's id, with a fingerprint of its
    content (so a sweep resumed under `out` replays a session that changed since)."""
    from evo_magic.analysis.lake_sessions import LakeBatches, LakeSession
    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts

    if isinstance(t, LakeTranscripts):
        prints = lake_fingerprints(t.lake)
        # Opened afresh, as a worker opens it: the sweep reads the lake, it does not repair it.
        # The sessions are `t`'s (which may be fewer than the lake's), not the fresh lake's.
        ids = t.session_ids()
        batched = LakeBatches.of(LakeTranscripts(t.lake, Transcripts), ids)
        return [Unit(sid, LakeSession(batched, sid), prints.get(sid, "")) for sid in ids]
    units = []
    for sid in t.session_ids():
        session = t.session(sid)
        units.append(Unit(sid, session, content_fingerprint(session)))
    return units


def content_fingerprint(t: Transcripts) -> str:
    """A hash of what a session's frames hold (every row and column of `FRAMES`; `events`
    aside, as it is built only on use), for a sweep to tell whether the session it kept a
    result for is still the same. Values are hashed, not their encoding (two loads of one
    file may number a column's categories, or lay out its buffers, differently)."""
    import pandas as pd

    from evo_magic.analysis.frames import FRAMES

    digest = hashlib.sha256()
    for name in FRAMES:
        frame = getattr(t, name)
        digest.update(json.dumps([name, [str(c) for c in frame.columns]]).encode())
        spelled = frame.astype(object).astype(str)  # every value as text, whatever its dtype
        digest.update(pd.util.hash_pandas_object(spelled, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def lake_fingerprints(lake: Path) -> dict[str, str]:
    """Each session of the lake at `lake`: a hash of the stamps (size and content hash) of
    the files it was read from, as the lake's manifest records them (updated when the lake
    reads a file that changed)."""
    from evo_magic.analysis.lake_manifest import read_manifest

    stamps: dict[str, dict[str, Any]] = {}
    for entry in read_manifest(Path(lake)).get("groups", {}).values():
        if not isinstance(entry, dict):
            continue
        files = entry.get("files") if isinstance(entry.get("files"), dict) else {}
        for session in entry.get("sessions") or []:
            mine = stamps.setdefault(str(session), {})
            for name, stamp in files.items():
                if isinstance(stamp, dict):
                    mine[str(name)] = [stamp.get("size"), stamp.get("hash")]
    return {
        session: hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()
        for session, found in stamps.items()
    }


def unit_session(payload: Transcripts | LakeSession | tuple[str, str]) -> Transcripts:
    """The session a unit's payload stands for (read from its lake when it names one)."""
    from evo_magic.analysis.lake_sessions import LakeSession
    from evo_magic.analysis.lake_transcripts import LakeTranscripts

    if isinstance(payload, LakeSession):
        return payload.read()
    if not isinstance(payload, tuple):
        return payload
    from evo_magic.analysis.transcripts import Transcripts

    lake, session_id = payload
    return LakeTranscripts(lake, Transcripts).session(session_id)
