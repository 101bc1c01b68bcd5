"""`%compact`'s line: its options, then the focus, word for word.

The options are read by the magic's own `magic_arguments` parser (passed in: the magic owns
it); everything after them is the focus as typed, so quotes, apostrophes, backslashes and
braces reach the summariser unchanged.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from IPython.core.error import UsageError

from evo_magic.notebook.sessions import DEFAULT_SESSION


@dataclass(frozen=True)
class CompactArgs:
    """What a `%compact` line asks for."""

    session: str = DEFAULT_SESSION
    focus: str | None = None
    strategy: str | None = None
    preview: bool = False
    edit: bool = False
    apply: bool = False
    apply_file: str | None = None
    undo: bool = False


def read_compact_line(line: str, parser: argparse.ArgumentParser) -> CompactArgs:
    """`%compact` arguments -> CompactArgs.

    The options (`%compact?` lists them; `--` ends them) are parsed by `parser`, the magic's
    own; the rest of the line is the focus, word for word: `focus=` in front is dropped, and a
    focus in quotes (`focus="..."`) loses its quotes. UsageError for an unterminated quote, a
    second focus, or words outside the quoted focus.
    """
    options: list[str] = []
    words = _words(line)
    start = len(line)
    for begin, word in words:
        if word == "--":
            start = next(words, (len(line), ""))[0]
            break
        if not word.startswith("-"):
            start = begin
            break
        options.append(word)
        action = parser._option_string_actions.get(word.partition("=")[0])
        if action is not None and action.nargs != 0 and "=" not in word:
            options.extend(_unquoted(value) for _, value in [next(words, (0, ""))] if value)
    opts = parser.parse_args([_unquoted(word) for word in options])
    modes = [m for m in ("preview", "edit", "apply", "apply_file", "undo") if getattr(opts, m)]
    if len(modes) > 1:
        shown = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise UsageError(f"%compact: {shown} do not go together; choose one")
    focus = _focus(line[start:].strip())
    if opts.undo and (focus or opts.strategy):
        raise UsageError("%compact --undo takes no focus and no --strategy: it restores the last")
    return CompactArgs(
        opts.session,
        focus,
        opts.strategy,
        opts.preview,
        opts.edit,
        opts.apply,
        opts.apply_file,
        opts.undo,
    )


def _words(line: str) -> Iterator[tuple[int, str]]:
    """Each word of `line` with where it starts, read as far as asked (quotes group words,
    as a shell does; the focus after the options is never read this way)."""
    lexer = shlex.shlex(line, posix=False)
    lexer.whitespace_split = True
    position = 0
    while True:
        try:
            word = lexer.get_token()
        except ValueError:
            raise UsageError(
                f"%compact: unterminated quote in {line.strip()!r}; close it, or leave the "
                "quotes out"
            ) from None
        if not word:
            return
        start = line.index(word, position)
        position = start + len(word)
        yield start, word


def _unquoted(word: str) -> str:
    """An option's value without the quotes around it (`"sliding-window(keep=2)"`)."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1]
    return word


def _focus(text: str) -> str | None:
    """The focus of the line's rest: `focus=` dropped, one pair of quotes around it removed;
    UsageError for a second `focus=`, an unterminated quote or words outside the quotes."""
    named = text.startswith("focus=")
    text = text.removeprefix("focus=")
    if " focus=" in f" {text}":
        stray = "a second focus=" if named else "words before focus="
        raise UsageError(
            f"%compact: {stray} in {text!r}; give one focus, last: %compact [options] focus=TEXT"
        )
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        if end == -1:
            raise UsageError(
                f"%compact: the focus opens a {quote} quote that is not closed; close it, or "
                "leave the quotes out (focus=TEXT takes the rest of the line)"
            )
        if text[end + 1 :].strip():
            raise UsageError(
                f"%compact: {text[end + 1 :].strip()!r} after the quoted focus; put it inside "
                "the quotes or leave it out"
            )
        text = text[1:end]
    return text.strip() or None


__all__ = ["CompactArgs", "read_compact_line"]
