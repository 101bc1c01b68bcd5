"""Every credential the session knows of, and the one redactor every outgoing string goes through.

A credential is known when it is in the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`,
read afresh on every call so a key set later with `%env` counts) or was added with `add_secret`
(a key passed in code) or `add_client_secrets` (a client object). `redact(text)` replaces each
with `REDACTED`; `StreamRedactor` does the same for a stream of deltas, holding back what could be
the start of a credential so that one split across chunks never prints in clear.

Values shorter than `MIN_SECRET_CHARS` are ignored: redacting a two-letter "key" would garble
every output while protecting nothing.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Iterable

SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Environment variables whose values are the session's credentials."""
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

_added: set[str] = set()
_lock = threading.Lock()


def add_secret(value: object) -> None:
    """Remember `value` as a credential for the rest of the process (ignored unless a string of
    at least `MIN_SECRET_CHARS` characters)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _added.add(value)


def add_client_secrets(client: object) -> None:
    """Remember the credentials an SDK client object holds (`api_key`, `auth_token`)."""
    for attribute in ("api_key", "auth_token"):
        add_secret(getattr(client, attribute, None))


def known_secrets() -> list[str]:
    """Every credential known now: the environment's, read afresh, and those added.

    Each value is listed with its JSON-escaped form when that differs (a record on disk holds
    the escaped form), longest first, without duplicates.
    """
    values = {os.environ.get(name, "") for name in SECRET_ENV_VARS}
    with _lock:
        values |= _added
    forms: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET_CHARS:
            forms.add(value)
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    return sorted(forms, key=lambda form: (-len(form), form))


@functools.lru_cache(maxsize=16)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first: where two credentials start at one place, the longer one is replaced whole.
    return re.compile("|".join(re.escape(value) for value in values))


def _ordered(secret_values: Iterable[str] | None) -> tuple[str, ...]:
    if secret_values is None:
        return tuple(known_secrets())
    values = {value for value in secret_values if len(value) >= MIN_SECRET_CHARS}
    return tuple(sorted(values, key=lambda value: (-len(value), value)))


def redact(text: str, secret_values: Iterable[str] | None = None) -> str:
    """`text` with every occurrence of a credential replaced by `REDACTED`.

    `secret_values` defaults to `known_secrets()`. Occurrences are replaced left to right; where
    several credentials match at one place the longest wins.
    """
    values = _ordered(secret_values)
    if not values or not any(value in text for value in values):
        return text  # the common case: one substring scan per value, no regex
    return _pattern(values).sub(REDACTED, text)


class StreamRedactor:
    """Redacts a text that arrives in pieces (streamed deltas).

    `feed(chunk)` returns the part that is safe to show now; a tail that could still become a
    credential is held back until the next chunk decides it. `flush()` returns what is held at
    the end. The outputs, concatenated, equal `redact` of the whole text.
    """

    def __init__(self, secret_values: Iterable[str] | None = None):
        self._fixed = None if secret_values is None else list(secret_values)
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The redacted text that can be shown now, "" when everything is held back."""
        text = self._held + chunk
        values = _ordered(self._fixed)
        if not values:
            self._held = ""
            return text
        out: list[str] = []
        position = 0
        hold_from = _first_partial(text, values, 0)
        for match in _pattern(values).finditer(text):
            if match.start() >= hold_from:
                break
            out.append(text[position : match.start()])
            out.append(REDACTED)
            position = match.end()
            if position > hold_from:
                hold_from = _first_partial(text, values, position)
        out.append(text[position:hold_from])
        self._held = text[hold_from:]
        return "".join(out)

    def flush(self) -> str:
        """What is still held back (never a whole credential); the redactor is then empty."""
        held, self._held = self._held, ""
        return redact(held, self._fixed)


def _first_partial(text: str, values: tuple[str, ...], start: int) -> int:
    """The first index >= `start` from which the rest of `text` is a proper prefix of a
    credential (so more text could complete it), or len(text) when there is none."""
    longest = max(len(value) for value in values)
    for index in range(max(start, len(text) - longest + 1), len(text)):
        tail = text[index:]
        if any(len(tail) < len(value) and value.startswith(tail) for value in values):
            return index
    return len(text)
