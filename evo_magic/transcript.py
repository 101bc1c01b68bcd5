"""The append-only, lossless on-disk record of a session.

Layout under the transcripts root (default `<workspace>/.evo_magic/`)::

    <session_id>/session.jsonl              every event, one JSON record per line
    <session_id>/snapshots/compaction-0001.jsonl   the full history before each compaction
    <session_id>/tool-results/<tool_use_id>.txt    full outputs too large for the context

Each record is serialised at once on the caller's thread (so later changes to what it
describes cannot change what was recorded) and written with one system call, so a crash loses
at most the record being written. When a write fails (a full disk, a file size limit), the
partial line is cut off again and the record waits in memory with any later ones; they are
written, in order, by the next write that succeeds. The file is fsynced at compaction
boundaries and on close. See docs/transcripts.md for the schema.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import secrets as random_ids
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from evo_magic.measure import to_json
from evo_magic.secrets import known_secrets, redact

SCHEMA_VERSION = 2
LOG_NAME = "session.jsonl"
DEFAULT_ROOT = ".evo_magic"
"""The transcripts root inside the workspace, when no other is given."""
OUTPUTS = "tool-results"

_open_transcripts: weakref.WeakSet[Transcript] = weakref.WeakSet()


def output_file(tool_use_id: str) -> str:
    """The name of the file a too-large tool output is saved in."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in tool_use_id) + ".txt"


def outputs_shown(directory: Path, workspace: Path) -> str:
    """How the model is shown the folder of a session's saved outputs (a session's
    `directory`): relative to the workspace when it is inside it, else absolute."""
    folder = directory / OUTPUTS
    try:
        return folder.relative_to(workspace).as_posix()
    except ValueError:
        return str(folder)


def default_outputs_shown(session_id: str) -> str:
    """`outputs_shown` for a session kept under the default root of its workspace."""
    return f"{DEFAULT_ROOT}/{session_id}/{OUTPUTS}"


def output_shown(folder: str, tool_use_id: str) -> str:
    """The path shown to the model for a saved output: live and replay both write it so."""
    return f"{folder}/{output_file(tool_use_id)}"


class TranscriptWriteError(OSError):
    """The transcript could not be written (e.g. the disk is full). Nothing is lost yet: the
    records wait in memory and are written by the next write that succeeds."""


def new_session_id(now: dt.datetime | None = None) -> str:
    """A sortable id that two sessions started in the same second never share."""
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%d-%H%M%S-") + random_ids.token_hex(4)


class Transcript:
    """Writes one session's records. Safe to call from several threads.

    `secrets` returns the credentials to keep out of every file (read at each write).
    """

    def __init__(
        self,
        root: Path,
        session_id: str | None = None,
        secrets: Callable[[], Iterable[str]] = known_secrets,
    ):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.session_id, self.directory = self._claim_directory(session_id)
        self.path = self.directory / LOG_NAME
        self._secrets = secrets
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        self._fd: int | None = os.open(self.path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._pending: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._seq = 0
        self._snapshots = 0
        self._before_exit: list[Callable[[], None]] = []
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
        return self._fd is None

    @property
    def pending(self) -> int:
        """Records waiting in memory because a write failed."""
        return len(self._pending)

    def redact(self, text: str) -> str:
        """`text` without any of the credentials this transcript keeps out of its files."""
        return redact(text, self._secrets())

    def write(
        self, kind: str, fields: dict[str, Any], encoded: Mapping[str, str] | None = None
    ) -> int:
        """Append one record; returns its sequence number. `encoded` holds fields whose values
        are JSON text already (written as they are, after the others).

        The record is serialised before this returns. Credentials are replaced by `REDACTED`.
        A value that is not JSON-able raises TypeError and writes nothing (and uses up no
        sequence number). A failed write raises TranscriptWriteError; the record is kept and
        written, before any later one, by the next write that succeeds.
        """
        with self._lock:
            if self._fd is None:
                raise ValueError(f"transcript {self.path} is closed")
            record = {
                "v": SCHEMA_VERSION,
                "session_id": self.session_id,
                "seq": self._seq + 1,
                "ts": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
                "kind": kind,
                **fields,
            }
            text = to_json(record)
            if encoded:
                extra = "".join(f",{to_json(name)}:{value}" for name, value in encoded.items())
                text = text[:-1] + extra + "}"
            line = self.redact(text) + "\n"
            self._seq += 1
            self._pending.append(line.encode("utf-8"))
            self._write_pending_locked()
            return self._seq

    def _write_pending_locked(self) -> None:
        assert self._fd is not None
        while self._pending:
            data = self._pending[0]
            written = 0
            try:
                while written < len(data):
                    written += os.write(self._fd, data[written:])
            except OSError as exc:
                if written:
                    # Cut the torn line off again, so the next record starts on a fresh line.
                    os.ftruncate(self._fd, self._size)
                raise TranscriptWriteError(
                    exc.errno,
                    f"could not write the transcript {self.path} ({exc.strerror or exc}); "
                    f"{len(self._pending)} record(s) wait in memory and are written when a "
                    "write succeeds again",
                ) from exc
            self._size += len(data)
            self._pending.popleft()

    def snapshot(self, messages: list[dict[str, Any]]) -> Path:
        """Durably write the full history (one message per line) and return the file's path."""
        with self._lock:
            self._snapshots += 1
            directory = self.directory / "snapshots"
            directory.mkdir(exist_ok=True)
            path = directory / f"compaction-{self._snapshots:04d}.jsonl"
            secret_values = list(self._secrets())
            lines = "".join(redact(to_json(m), secret_values) + "\n" for m in messages)
            try:
                with open(path, "x", encoding="utf-8") as f:
                    f.write(lines)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError:
                path.unlink(missing_ok=True)  # never leave half a snapshot behind
                raise
            self._fsync_locked()
        return path

    def save_tool_output(self, tool_use_id: str, text: str) -> Path:
        """Write a full tool output that is too large for the context; returns the file."""
        directory = self.directory / OUTPUTS
        directory.mkdir(exist_ok=True)
        path = directory / output_file(tool_use_id)
        path.write_text(self.redact(text), encoding="utf-8")
        return path

    def sync(self) -> None:
        """Write what waits, then fsync the log (compaction boundaries, the end of an ask)."""
        with self._lock:
            if self._fd is not None and self._pending:
                self._write_pending_locked()
            self._fsync_locked()

    def _fsync_locked(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def before_exit(self, last_words: Callable[[], None]) -> None:
        """Call `last_words` at interpreter exit, before this transcript is closed, if it is
        still open then (a session's owner writes what it still owes, e.g. the charge of a summary
        prepared in the background that no compaction took)."""
        self._before_exit.append(last_words)

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            try:
                if self._pending:
                    self._write_pending_locked()
                self._fsync_locked()
            finally:
                os.close(self._fd)
                self._fd = None


@atexit.register
def _close_all() -> None:
    for transcript in list(_open_transcripts):
        if transcript.closed:
            continue
        for last_words in transcript._before_exit:
            with contextlib.suppress(Exception):  # at exit, a failure here must not lose the rest
                last_words()
        with contextlib.suppress(OSError):  # at exit, nothing more can be done about a full disk
            transcript.close()
