"""Which registered format each file of a load is in, by its content: a folder's files that
no reader recognises are counted (and, for JSON lines, warned about), a file named on its own
that none recognises is refused."""

from __future__ import annotations

import warnings
from pathlib import Path

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats.registry import HEAD_BYTES, TAIL_BYTES, Sniff, readers, recognise
from evo_magic.analysis.loader import SourceFile, sniff_file


def count_skipped(skipped: dict[str, int], reason: str, n: int = 1) -> None:
    """Add `n` to the count of `reason` in `skipped`."""
    skipped[reason] = skipped.get(reason, 0) + n


def recognisable(files: list[Path], single: bool, skipped: dict[str, int]) -> list[Path]:
    """`files` without those found in a folder that are not JSON lines and that no reader
    recognises by their first and last bytes (a folder's other `.json` files): counted in
    `skipped`, never read whole."""
    kept = []
    for file in files:
        if single or file.suffix.lower() == ".jsonl" or recognise(sniff_file(file)):
            kept.append(file)
        else:
            count_skipped(skipped, "file in no known format")
    return kept


def format_of(source: SourceFile, single: bool, skipped: dict[str, int]) -> str | None:
    """The format of `source` by its content (the registered readers' `detect` hooks), or
    None to skip it (counted in `skipped`, with a warning for a file in no known format, or
    its lines counted as bad). A file in a folder that is not JSON lines and that no reader
    recognises (any other `.json` there) is counted, not warned about."""
    head = source.head()
    sniff = Sniff(source.path, source.data[:HEAD_BYTES], head.records, source.data[-TAIL_BYTES:])
    kind = recognise(sniff)
    if kind is not None:
        return kind
    if not single and source.path.suffix.lower() != ".jsonl":
        count_skipped(skipped, "file in no known format")  # recognised by its ends, not its whole
        return None
    if not head:
        if len(source.numbers) == 0:
            count_skipped(skipped, "empty file")
        elif len(source.numbers) <= 50:
            source.bad.extend(source.numbers.tolist())  # torn or corrupt throughout
        else:
            raise TranscriptError(f"{source.path}: none of its first 50 lines is a JSON object")
        return None
    number, record = head[0]
    message = (
        f"{source.path} is neither an evo_magic transcript nor in another registered format "
        f"({', '.join(list(readers())[1:])}): the record at line {number} has keys "
        f"{sorted(record)[:8]}"
    )
    if single:
        raise TranscriptError(message)
    warnings.warn(message + "; skipped", TranscriptWarning, stacklevel=7)
    count_skipped(skipped, "file in no known format")
    return None
