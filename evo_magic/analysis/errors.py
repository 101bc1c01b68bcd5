"""What the transcript loader raises and warns."""

from __future__ import annotations


class TranscriptError(ValueError):
    """A transcript cannot be loaded: no such path, nothing in it, a file named on its own that
    is in no known format, or a record written by a newer evo_magic than this one reads."""


class TranscriptWarning(UserWarning):
    """Part of a transcript was skipped (torn or corrupt lines, a file in no known format found
    in a folder); the rest was loaded."""
