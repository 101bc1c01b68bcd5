"""A sweep's results under `out`: `<frame>/<id hash>.parquet` per unit and frame, then a marker
in `done/` (or `failed/`) written last; `sweep.json` says which settings they are for."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from evo_magic.analysis.atomic import id_name, write_atomically, write_parquet_atomically
from evo_magic.analysis.engine.base import Frames, Outcome, SweepError

FORMAT_VERSION = 1


class Store:
    """The results of one sweep's settings under `root`; another settings' folder is refused."""

    def __init__(self, root: Path, settings: str):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        _claim(root / "sweep.json", hashlib.sha256(settings.encode()).hexdigest())
        self.done = root / "done"
        self.failed = root / "failed"
        self.done.mkdir(exist_ok=True)
        self.failed.mkdir(exist_ok=True)

    def is_done(self, key: str, fingerprint: str = "") -> bool:
        """Whether the unit's result is here, for this content, and can be read back: its
        marker names the id and the fingerprint, and each of its frames' files is a Parquet
        file whose footer reads (a truncated or missing file: run the unit again)."""
        record = self._marker(key)
        if record is None or record.get("fingerprint", "") != fingerprint:
            return False
        import pyarrow.parquet as pq

        try:
            for frame in record["frames"]:
                pq.read_metadata(self._frame_path(frame, key))
        except Exception:  # any file that does not read back: the unit runs again
            return False
        return True

    def save(self, outcome: Outcome, fingerprint: str = "") -> None:
        """The outcome's frames, then its marker with the unit's fingerprint (a failure: its
        marker only)."""
        name = id_name(outcome.key)
        if outcome.error is not None:
            record = {"session_id": outcome.key, "error": outcome.error}
            write_atomically(self.failed / f"{name}.json", json.dumps(record).encode())
            return
        import pyarrow as pa

        written = []
        for frame_name, frame in (outcome.frames or {}).items():
            if not frame_name.isidentifier():
                raise SweepError(f"a frame's name must be an identifier, got {frame_name!r}")
            folder = self.root / frame_name
            folder.mkdir(exist_ok=True)
            table = pa.Table.from_pandas(frame, preserve_index=False)
            write_parquet_atomically(table, folder / f"{name}.parquet")
            written.append(frame_name)
        record = {"session_id": outcome.key, "fingerprint": fingerprint, "frames": written}
        write_atomically(self.done / f"{name}.json", json.dumps(record).encode())
        (self.failed / f"{name}.json").unlink(missing_ok=True)

    def load(self, key: str) -> Frames:
        """The unit's frames as saved; `SweepError` naming the file when one cannot be read
        back (it is data: damaged since the sweep checked it)."""
        import pandas as pd

        record = self._marker(key)
        if record is None:
            raise SweepError(f"the marker of {key!r} under {self.done} cannot be read back")
        frames = {}
        for frame in record["frames"]:
            path = self._frame_path(frame, key)
            try:
                frames[frame] = pd.read_parquet(path)
            except Exception as exc:  # data on disk: whatever fails, that unit is a failure
                raise SweepError(f"{path} cannot be read back ({exc})") from exc
        return frames

    def _marker(self, key: str) -> dict[str, Any] | None:
        """The unit's done marker when it is one written for this id (frames: identifiers
        only), else None."""
        try:
            record = json.loads((self.done / f"{id_name(key)}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("session_id") != key:
            return None
        frames = record.get("frames")
        if not isinstance(frames, list) or not all(
            isinstance(frame, str) and frame.isidentifier() for frame in frames
        ):
            return None
        return record

    def _frame_path(self, frame: str, key: str) -> Path:
        """Where a unit's frame is kept: refused (OSError) when that is not a regular file
        of its own (a link planted there is not followed)."""
        path = self.root / frame / f"{id_name(key)}.parquet"
        if path.is_symlink() or not path.is_file():
            raise FileNotFoundError(f"{path} is not a regular file")
        return path


def _claim(manifest: Path, fingerprint: str) -> None:
    """The folder's manifest written for `fingerprint`, or found to be for it."""
    if not manifest.is_file():
        record = {"version": FORMAT_VERSION, "settings": fingerprint}
        write_atomically(manifest, json.dumps(record).encode())
        return
    try:
        found = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SweepError(f"{manifest} is not a sweep manifest ({exc})") from exc
    if not isinstance(found, dict) or found.get("settings") != fingerprint:
        raise SweepError(
            f"{manifest.parent} holds a sweep of other settings (strategies or options); give "
            "another out= folder, or delete this one to start afresh"
        )
