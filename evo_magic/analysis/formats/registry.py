"""Transcript formats as plug-ins: every reader, built in or not, is an entry point of the group
`evo_magic.formats`, and a file's format is the first reader whose `detect` hook recognises
its content.

A reader is any object with the attributes of `Reader`; `Format` is a ready-made one. A
package registers its own in its `pyproject.toml`:

    [project.entry-points."evo_magic.formats"]
    my_agent = "my_package.reader:FORMAT"

Only registered entry points are ever imported: a file's content names a format, never code.
The built-ins are declared the same way in evo_magic's own `pyproject.toml`; when evo_magic
runs from a checkout that was never installed (no entry points), the same table below is used.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.formats import Part

ENTRY_POINT_GROUP = "evo_magic.formats"
DISTRIBUTION = "evo-magic"
BUILTIN = {
    "evo_magic": "evo_magic.analysis.formats.evo:FORMAT",
    "codex": "evo_magic.analysis.formats.codex:FORMAT",
    "claude_code": "evo_magic.analysis.formats.claude_code:FORMAT",
    "swe_agent": "evo_magic.analysis.formats.swe_agent:FORMAT",
    "mini_swe_agent": "evo_magic.analysis.formats.swe_agent:MINI_FORMAT",
    "inspect": "evo_magic.analysis.formats.inspect_ai:FORMAT",
    "openhands": "evo_magic.analysis.formats.openhands:FORMAT",
    "gemini_cli": "evo_magic.analysis.formats.gemini_cli:FORMAT",
}
"""The built-in readers, in the order they are asked (as declared in pyproject.toml)."""
HEAD_BYTES = 1 << 16
"""How much of a file's start a `detect` hook sees (`Sniff.head`)."""
TAIL_BYTES = 1 << 12
"""How much of a file's end a `detect` hook sees (`Sniff.tail`)."""


@dataclass(frozen=True)
class Sniff:
    """What a `detect` hook sees of a file: its path (for its suffix only: a reader must
    recognise content), its first and last bytes, and its first readable JSON lines."""

    path: Path
    head: bytes
    """Up to `HEAD_BYTES` of the file's start."""
    records: Sequence[dict[str, Any]] = field(default_factory=list)
    """The first records of a JSON-lines file that parse as JSON objects (may be empty; a
    sequence parsed as far as it is looked at)."""
    tail: bytes = b""
    """Up to `TAIL_BYTES` of the file's end (where some documents keep their format's name)."""


@runtime_checkable
class Reader(Protocol):
    """What the loader asks of a format.

    `name` is the `source` column's value; `reads` and `recognised_by` say in a sentence what
    files it reads and how it knows them (what `formats()` shows); `suffixes` are the file
    name endings a folder is searched for on its behalf (its format is still decided by
    content); `detect(sniff)` says whether a file is in this format; `read(engine, sources)`
    maps the records of files of this format to the frames' rows (a `Part`): `engine` is an
    `evo_magic.analysis.loader.Engine` (DuckDB), `sources` the files' `SourceFile`s, each
    with its bytes (`data`) and line starts."""

    name: str
    reads: str
    recognised_by: str
    suffixes: tuple[str, ...]

    def detect(self, sniff: Sniff) -> bool: ...

    def read(self, engine: Any, sources: list[Any]) -> Part: ...


@dataclass(frozen=True)
class Format:
    """A reader made of two functions (see `Reader`)."""

    name: str
    reads: str
    recognised_by: str
    detect_hook: Callable[[Sniff], bool]
    read_hook: Callable[[Any, list[Any]], Part]
    suffixes: tuple[str, ...] = (".jsonl",)
    group_hook: Callable[[Sniff], str | None] | None = None
    """Optional: which files are one session (see `group_of`)."""

    def detect(self, sniff: Sniff) -> bool:
        return self.detect_hook(sniff)

    def group(self, sniff: Sniff) -> str | None:
        return self.group_hook(sniff) if self.group_hook is not None else None

    def read(self, engine: Any, sources: list[Any]) -> Part:
        return self.read_hook(engine, sources)


@dataclass(frozen=True)
class Registered:
    """A reader and the distribution that provides it."""

    reader: Reader
    provided_by: str
    entry_point: str


def readers() -> dict[str, Registered]:
    """Every registered reader by name: the built-ins in their order, then other packages'
    entry points by name. A third party's entry point that reuses a built-in's name, or that
    does not load as a `Reader`, is left out with a warning."""
    return dict(_readers(_entry_points()))


def _entry_points() -> tuple[EntryPoint, ...]:
    """The group's entry points, read once per `sys.path` (a scan of every installed
    distribution costs tens of milliseconds: a load asks for each file)."""
    return _scan(tuple(sys.path))


@lru_cache(maxsize=8)
def _scan(path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


@lru_cache(maxsize=8)
def _readers(found: tuple[EntryPoint, ...]) -> tuple[tuple[str, Registered], ...]:
    ours = {e.name: e for e in found if _distribution(e) == DISTRIBUTION and e.name in BUILTIN}
    out: dict[str, Registered] = {}
    for name, target in BUILTIN.items():
        entry = ours.get(name)
        value = entry.value if entry is not None else target
        out[name] = Registered(_load(value), DISTRIBUTION, value)
    for entry in sorted(found, key=lambda e: e.name):
        if _distribution(entry) == DISTRIBUTION and entry.name in BUILTIN:
            continue
        where = f"entry point {entry.name!r} ({entry.value}) of {_distribution(entry)}"
        if entry.name in out:
            _warn(f"{where} reuses the name of a reader already registered; left out")
            continue
        try:
            reader = entry.load()
        except Exception as error:  # a broken plug-in must not stop a load of other formats
            _warn(f"{where} did not load ({type(error).__name__}: {error}); left out")
            continue
        problem = _problem(reader, entry.name)
        if problem:
            _warn(f"{where} {problem}; left out")
            continue
        out[entry.name] = Registered(reader, _distribution(entry), entry.value)
    return tuple(out.items())


def _load(value: str) -> Reader:
    module, _, attribute = value.partition(":")
    return getattr(import_module(module), attribute)


def _problem(reader: Any, name: str) -> str | None:
    """What makes `reader` unusable as the reader `name`, or None."""
    if not isinstance(reader, Reader):
        return "is not a reader (it needs name, reads, recognised_by, suffixes, detect, read)"
    if reader.name != name:
        return f"names its format {reader.name!r}, not {name!r}"
    if not all(isinstance(s, str) and s.startswith(".") for s in reader.suffixes):
        return "has suffixes that are not file name endings such as '.json'"
    return None


def _distribution(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return str(dist.name) if dist is not None else "unknown"


def _warn(message: str) -> None:
    from evo_magic.analysis.errors import TranscriptWarning

    warnings.warn(f"transcript formats: {message}", TranscriptWarning, stacklevel=4)


def reader(name: str) -> Reader:
    """The registered reader called `name`."""
    return readers()[name].reader


def recognise(sniff: Sniff, among: Mapping[str, Registered] | None = None) -> str | None:
    """The name of the first reader whose `detect` recognises `sniff`, or None. A hook that
    fails is a reader that does not recognise the file."""
    for name, registered in (among or readers()).items():
        try:
            if registered.reader.detect(sniff):
                return name
        except Exception:  # a plug-in's bug is not this file's format
            continue
    return None


def group_of(name: str, sniff: Sniff) -> str | None:
    """The session a file of format `name` belongs to when it is one of several files of a
    session (a conversation folder's events): the reader's optional `group(sniff)` hook, whose
    files are then read together; None for a file that is a session of its own."""
    group = getattr(reader(name), "group", None)
    if group is None:
        return None
    try:
        key = group(sniff)
    except Exception:  # a plug-in's bug: the file is read on its own
        return None
    return key if isinstance(key, str) and key else None


def suffixes() -> frozenset[str]:
    """Every file name ending some reader reads (what a folder is searched for)."""
    return frozenset(s.lower() for r in readers().values() for s in r.reader.suffixes)


def formats() -> pd.DataFrame:
    """The transcript formats `load_transcripts` reads: one row per registered reader, in the
    order they are asked, with `name` (the `source` column's value), `reads`,
    `recognised_by`, `suffixes` (the files a folder is searched for) and `provided_by` (the
    distribution and its entry point)."""
    import pandas as pd

    rows = [
        {
            "name": name,
            "reads": r.reader.reads,
            "recognised_by": r.reader.recognised_by,
            "suffixes": ", ".join(r.reader.suffixes),
            "provided_by": f"{r.provided_by} ({r.entry_point})",
        }
        for name, r in readers().items()
    ]
    columns = ["name", "reads", "recognised_by", "suffixes", "provided_by"]
    return pd.DataFrame(rows, columns=columns).astype("string")
