"""The append-only, lossless on-disk record of a session.

Layout under the transcripts root (default `<workspace>/.evo_magic/`)::

    <session_id>/session.jsonl              every event, one JSON record per line
    <session_id>/snapshots/compaction-0001.jsonl   the full history before each compaction
    <session_id>/tool-results/<tool_use_id>.txt    full outputs too large for the context

Each record is serialised on the caller's thread at once (so later in-place edits of a message,
such as micro-compaction, cannot change what was recorded) and written with one flush; the file
is fsynced at compaction boundaries and on close. See docs/transcripts.md for the schema.
"""

from __future__ import annotations

import atexit
import datetime as dt
import os
import secrets
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evo_magic.compact.measure import to_json

SCHEMA_VERSION = 1
LOG_NAME = "session.jsonl"
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
REDACTED = "[redacted]"

_open_transcripts: weakref.WeakSet[Transcript] = weakref.WeakSet()


def new_session_id(now: dt.datetime | None = None) -> str:
    """A sortable id that two sessions started in the same second never share."""
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)


def known_secrets() -> list[str]:
    """Credentials from the environment that must never reach a record.

    Read afresh on every write (about a microsecond), so a key set after the session started,
    e.g. with `%env` in a notebook, is redacted too."""
    return [v for name in SECRET_ENV_VARS if len(v := os.environ.get(name, "")) >= 8]


def redact(text: str, secret_values: Iterable[str]) -> str:
    """`text` with every occurrence of each secret value replaced by `REDACTED`."""
    for value in secret_values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class Transcript:
    """Writes one session's records. Safe to call from several threads."""

    def __init__(self, root: Path, session_id: str | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.session_id, self.directory = self._claim_directory(session_id)
        self.path = self.directory / LOG_NAME
        # Open for the object's life; newline="\n": one record per "\n" line on every platform.
        self._file = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
        self._lock = threading.Lock()
        self._seq = 0
        self._snapshots = 0
        _open_transcripts.add(self)

    def _claim_directory(self, session_id: str | None) -> tuple[str, Path]:
        # mkdir without exist_ok is the atomic claim: a collision just draws a new id.
        for _ in range(100):
            candidate = session_id or new_session_id()
            directory = self.root / candidate
            try:
                directory.mkdir()
                return candidate, directory
            except FileExistsError:
                if session_id is not None:
                    raise ValueError(
                        f"a transcript for session {session_id!r} already exists"
                    ) from None
        raise RuntimeError("could not find a free session directory")

    @property
    def closed(self) -> bool:
        return self._file.closed

    def write(self, kind: str, fields: dict[str, Any]) -> int:
        """Append one record and flush it to the OS; returns its sequence number.

        The record is serialised before this returns, so later in-place edits of `fields` do not
        change what was written. Credentials found in the environment at this moment are replaced
        by `REDACTED`. A value that is not JSON-able raises TypeError and writes nothing (and uses
        up no sequence number).
        """
        with self._lock:
            if self._file.closed:
                raise ValueError(f"transcript {self.path} is closed")
            record = {
                "v": SCHEMA_VERSION,
                "session_id": self.session_id,
                "seq": self._seq + 1,
                "ts": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
                "kind": kind,
                **fields,
            }
            line = redact(to_json(record), known_secrets()) + "\n"
            self._seq += 1
            # One write of the whole line, then a flush: a crash loses at most this record,
            # and leaves at most one torn line, the last (the loader skips it and says so).
            self._file.write(line)
            self._file.flush()
            return self._seq

    def snapshot(self, messages: list[dict[str, Any]]) -> Path:
        """Durably write the full history (one message per line) and return the file's path."""
        with self._lock:
            self._snapshots += 1
            directory = self.directory / "snapshots"
            directory.mkdir(exist_ok=True)
            path = directory / f"compaction-{self._snapshots:04d}.jsonl"
            secret_values = known_secrets()
            lines = "".join(redact(to_json(m), secret_values) + "\n" for m in messages)
            with open(path, "x", encoding="utf-8") as f:
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
            self._fsync_locked()
        return path

    def save_tool_output(self, tool_use_id: str, text: str) -> Path:
        """Write a full tool output that is too large for the context; returns the file."""
        directory = self.directory / "tool-results"
        directory.mkdir(exist_ok=True)
        safe_id = "".join(c if c.isalnum() or c in "-_" else "_" for c in tool_use_id)
        path = directory / f"{safe_id}.txt"
        path.write_text(redact(text, known_secrets()), encoding="utf-8")
        return path

    def sync(self) -> None:
        """Flush and fsync the log (compaction boundaries, close)."""
        with self._lock:
            self._fsync_locked()

    def _fsync_locked(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._fsync_locked()
                self._file.close()


@atexit.register
def _close_all() -> None:
    for transcript in list(_open_transcripts):
        transcript.close()
