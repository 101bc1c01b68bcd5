"""Every credential the session knows of, and the one redactor every outgoing string goes through.

A credential is known when it is in the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`,
and the `user:password` of a URL in `ANTHROPIC_BASE_URL` or a proxy variable, read afresh on
every call so a key set later with `%env` counts) or was added with `add_secret` (a key passed
in code) or `add_client_secrets` (a client object).

`redact(text)` replaces with `REDACTED` each credential and what a command trivially makes of one
(its *forms*: the JSON-escaped, reversed, URL-encoded, hex and base64 spellings, base64 in each
of its three alignments), and any fragment of `FRAGMENT_CHARS` or more characters of a form (a
key cut in two by `cut`, or a base64 line wrapped mid-key). `StreamRedactor` does the same for a
stream of deltas, holding back what could still become such a fragment.

Values shorter than `MIN_SECRET_CHARS` are ignored: redacting a two-letter "key" would garble
every output while protecting nothing.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Environment variables whose values are the session's credentials."""
URL_ENV_VARS = (
    "ANTHROPIC_BASE_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
"""Environment variables holding a URL whose user information (`user:password@`) is a credential."""
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
FRAGMENT_CHARS = 12
"""A run of this many characters of a credential's form is redacted wherever it appears."""
_GRAM = 6
_STRIDE = MIN_SECRET_CHARS - _GRAM + 1
"""The text is looked up in runs of _GRAM characters every _STRIDE characters: every run of
MIN_SECRET_CHARS (or more) characters holds one of them, so no form or fragment is missed."""

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


def url_credentials(url: object) -> list[str]:
    """The credentials a URL holds (`http://user:pass@host`): its user information as written
    (`user:pass`), and the password as written and decoded; [] when none."""
    if not isinstance(url, str) or "@" not in url:
        return []
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if not userinfo:
        return []
    password = userinfo.partition(":")[2]
    return [value for value in (userinfo, password, urllib.parse.unquote(password)) if value]


def url_without_credentials(url: str) -> str:
    """`url` with its user information (`user:pass@`) replaced by `REDACTED`, for a message."""
    credentials = url_credentials(url)
    return url.replace(credentials[0] + "@", REDACTED + "@", 1) if credentials else url


def known_secrets() -> list[str]:
    """Every credential known now: the environment's, read afresh, and those added.

    Each value is listed with its JSON-escaped form when that differs (a record on disk holds
    the escaped form), longest first, without duplicates.
    """
    values = {os.environ.get(name, "") for name in SECRET_ENV_VARS}
    for name in URL_ENV_VARS:
        values.update(url_credentials(os.environ.get(name)))
    with _lock:
        values |= _added
    forms: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET_CHARS:
            forms.add(value)
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    return sorted(forms, key=lambda form: (-len(form), form))


def environment_without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the credential variables (`SECRET_ENV_VARS`) and without any variable
    whose value holds a known credential, whatever its name (a URL with a password, a key
    copied into another variable): what a process the session starts may inherit."""
    secrets = known_secrets()
    return {
        name: value
        for name, value in environ.items()
        if name not in SECRET_ENV_VARS and not any(secret in value for secret in secrets)
    }


def secret_forms(value: str) -> set[str]:
    """What a command trivially makes of `value`: itself, reversed, URL-encoded, hex (both
    cases) and base64 (standard and URL-safe alphabets, each of the three alignments the value
    can have in a longer text: only the characters that depend on the value alone)."""
    data = value.encode("utf-8")
    forms = {value, value[::-1], urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    forms |= {data.hex(), data.hex().upper()}
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + data).decode("ascii")
        # Character k covers bits 6k..6k+6; the value's bits are 8*shift..8*(shift+len).
        first, end = -(-8 * shift // 6), 8 * (shift + len(data)) // 6
        core = encoded[first:end]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


@dataclass(frozen=True)
class _Matcher:
    """The forms of a set of credentials, indexed by every run of _GRAM characters in them."""

    forms: tuple[str, ...]
    grams: dict[str, tuple[tuple[int, int], ...]]
    """Run of _GRAM characters -> (form index, offset in the form) of every place it is in."""
    longest: int

    def _hits(self, text: str) -> Iterator[tuple[int, tuple[tuple[int, int], ...]]]:
        grams = self.grams
        for start in range(0, len(text) - _GRAM + 1, _STRIDE):
            places = grams.get(text[start : start + _GRAM])
            if places is not None:
                yield start, places

    def any_in(self, text: str) -> bool:
        """Whether `text` may hold something to redact (the cheap test)."""
        return next(self._hits(text), None) is not None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The places in `text` to redact, merged where they overlap, in order."""
        found: list[tuple[int, int]] = []
        # (form, where in the text it would start) -> the end of the run extended there: a
        # hit inside it is the same run; one beyond it may be a second run of that form.
        reached: dict[tuple[int, int], int] = {}
        for start, places in self._hits(text):
            for form_index, offset in places:
                diagonal = (form_index, start - offset)
                if start < reached.get(diagonal, -1):
                    continue
                form = self.forms[form_index]
                left, end = _run(text, start, form, offset)
                reached[diagonal] = end
                if end - left >= min(FRAGMENT_CHARS, len(form)):
                    found.append((left, end))
        return _merged(found)

    def pending_from(self, text: str) -> int:
        """The first index from which the rest of `text` is part of a form (so more text could
        make it a fragment to redact); len(text) when there is none."""
        low, high = max(0, len(text) - self.longest), len(text)
        while low < high:  # a suffix of a part of a form is part of it: bisect
            middle = (low + high) // 2
            tail = text[middle:]
            if any(tail in form for form in self.forms):
                high = middle
            else:
                low = middle + 1
        return low


def _run(text: str, start: int, form: str, offset: int) -> tuple[int, int]:
    """The longest run of `text` around `start` that matches `form` placed so that its
    character `offset` is at `start` (text[start] == form[offset])."""
    right = min(start + len(form) - offset, len(text))
    end = start
    while end < right and text[end] == form[offset + end - start]:
        end += 1
    left, low = start, max(0, start - offset)
    while left > low and text[left - 1] == form[offset - (start - left) - 1]:
        left -= 1
    return left, end


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans joined (spans that only touch stay apart)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(set(spans)):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


@functools.lru_cache(maxsize=16)
def _matcher(values: tuple[str, ...]) -> _Matcher | None:
    forms = sorted({form for value in values for form in secret_forms(value)})
    if not forms:
        return None
    grams: dict[str, list[tuple[int, int]]] = {}
    for index, form in enumerate(forms):
        for offset in range(len(form) - _GRAM + 1):
            grams.setdefault(form[offset : offset + _GRAM], []).append((index, offset))
    indexed = {gram: tuple(places) for gram, places in grams.items()}
    return _Matcher(tuple(forms), indexed, max(len(form) for form in forms))


def _ordered(secret_values: Iterable[str] | None) -> tuple[str, ...]:
    if secret_values is None:
        return tuple(known_secrets())
    values = {value for value in secret_values if len(value) >= MIN_SECRET_CHARS}
    return tuple(sorted(values, key=lambda value: (-len(value), value)))


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    position = 0
    for start, end in spans:
        out += [text[position:start], REDACTED]
        position = end
    out.append(text[position:])
    return "".join(out)


def redact(text: str, secret_values: Iterable[str] | None = None) -> str:
    """`text` with every credential, every form of one and every fragment of a form of
    `FRAGMENT_CHARS` characters or more replaced by `REDACTED` (overlapping finds by one).

    `secret_values` defaults to `known_secrets()`.
    """
    matcher = _matcher(_ordered(secret_values))
    if matcher is None or not matcher.any_in(text):
        return text  # the common case: one look-up every few characters
    return _replace(text, matcher.spans(text))


class StreamRedactor:
    """Redacts a text that arrives in pieces (streamed deltas).

    `feed(chunk)` returns the part that is safe to show now; a tail that could still become
    (part of) a credential is held back until the next chunk decides it. `flush()` returns what
    is held at the end. The outputs, concatenated, equal `redact` of the whole text.
    """

    def __init__(self, secret_values: Iterable[str] | None = None):
        self._fixed = None if secret_values is None else list(secret_values)
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The redacted text that can be shown now, "" when everything is held back."""
        text = self._held + chunk
        matcher = _matcher(_ordered(self._fixed))
        if matcher is None:
            self._held = ""
            return text
        cut = matcher.pending_from(text)
        spans = matcher.spans(text)
        # A find that runs over the cut is complete (it stopped before the end) but may still
        # join one that the next chunk brings: hold it back whole.
        for start, end in reversed(spans):
            if start < cut < end:
                cut = start
        shown = [span for span in spans if span[1] <= cut]
        self._held = text[cut:]
        return _replace(text[:cut], shown)

    def flush(self) -> str:
        """What is still held back (never a whole credential); the redactor is then empty."""
        held, self._held = self._held, ""
        return redact(held, self._fixed)
