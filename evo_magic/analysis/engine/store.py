"""A sweep's results under `out`: `<frame>/<id hash>.parquet` per unit and frame, then a marker
in `done/` (or `failed/`) written last; `sweep.json` says which settings they are for."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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

    def is_done(self, key: str) -> bool:
        return (self.done / f"{id_name(key)}.json").is_file()

    def save(self, outcome: Outcome) -> None:
        """The outcome's frames, then its marker (a failure: its marker only)."""
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
        record = {"session_id": outcome.key, "frames": written}
        write_atomically(self.done / f"{name}.json", json.dumps(record).encode())
        (self.failed / f"{name}.json").unlink(missing_ok=True)

    def load(self, key: str) -> Frames:
        import pandas as pd

        name = id_name(key)
        record = json.loads((self.done / f"{name}.json").read_text(encoding="utf-8"))
        return {
            frame: pd.read_parquet(self.root / frame / f"{name}.parquet")
            for frame in record["frames"]
            if str(frame).isidentifier()
        }


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
