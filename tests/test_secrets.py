"""Every credential the session knows is redacted, in whole texts and in streams of deltas."""

from __future__ import annotations

import base64
import secrets as random_secrets
import textwrap
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_magic.secrets import (
    FRAGMENT_CHARS,
    MIN_SECRET_CHARS,
    REDACTED,
    StreamRedactor,
    add_client_secrets,
    add_secret,
    known_secrets,
    redact,
    secret_forms,
    url_credentials,
)


def new_key() -> str:
    return f"sk-ant-api03-{random_secrets.token_urlsafe(24)}"


def test_environment_keys_are_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key()
    assert key not in known_secrets()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)  # e.g. %env after the session started
    assert key in known_secrets()
    assert redact(f"the key is {key}.") == f"the key is {REDACTED}."
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-" + key)
    assert redact(f"Bearer tok-{key}") == f"Bearer {REDACTED}"


def test_keys_passed_in_code_and_held_by_clients_are_redacted() -> None:
    in_code, api_key, token = new_key(), new_key(), new_key()
    add_secret(in_code)

    class Client:  # the two attributes the anthropic SDK's client has
        def __init__(self) -> None:
            self.api_key = api_key
            self.auth_token = token

    add_client_secrets(Client())
    add_client_secrets(object())  # a client without credentials adds nothing
    text = f"{in_code} {api_key}\n{token}"
    assert redact(text) == f"{REDACTED} {REDACTED}\n{REDACTED}"


def test_short_values_and_non_strings_are_ignored() -> None:
    add_secret("x" * (MIN_SECRET_CHARS - 1))
    add_secret(None)
    add_secret(12345678901)
    assert redact("x" * 20) == "x" * 20


def test_the_json_escaped_form_is_redacted_too() -> None:
    odd = 'key"with\\quote' + random_secrets.token_hex(4)
    add_secret(odd)
    escaped = odd.replace("\\", "\\\\").replace('"', '\\"')
    assert redact(f'{{"text":"{escaped}"}}') == f'{{"text":"{REDACTED}"}}'


def test_the_longest_of_overlapping_credentials_wins() -> None:
    short, long = "abcdefgh", "abcdefghXYZ"
    assert redact("..abcdefghXYZ..abcdefgh..", [short, long]) == f"..{REDACTED}..{REDACTED}.."


def test_a_key_split_across_chunks_never_prints_in_clear() -> None:
    key = new_key()
    text = f"here: {key} and again {key}!"
    for cut in range(1, len(text)):
        for second_cut in (cut, min(cut + 7, len(text))):
            redactor = StreamRedactor([key])
            chunks = [text[:cut], text[cut:second_cut], text[second_cut:]]
            shown = [redactor.feed(chunk) for chunk in chunks] + [redactor.flush()]
            assert "".join(shown) == f"here: {REDACTED} and again {REDACTED}!"
            # No piece shown on its own holds a run of the key long enough to matter.
            assert all(key[:12] not in piece for piece in shown)


def test_the_stream_holds_back_only_what_could_become_part_of_a_key() -> None:
    key = "sk-ant-0123456789"
    redactor = StreamRedactor([key])
    assert redactor.feed("plain text ") == "plain text "  # no form of the key has a space
    assert redactor.feed("then sk-an") == "then "
    assert redactor.feed("swer; ") == "sk-answer; "
    assert redactor.feed(" sk-ant-01") == " "
    assert redactor.flush() == "sk-ant-01"  # the stream ended: 9 characters, not a fragment


def test_the_stream_waits_for_a_longer_credential_that_starts_like_a_shorter_one() -> None:
    short, long = "abcdefgh", "abcdefghXYZ"
    redactor = StreamRedactor([short, long])
    shown = redactor.feed("..abcdefgh") + redactor.feed("XY") + redactor.feed("Z..")
    assert shown + redactor.flush() == f"..{REDACTED}.."


def test_the_stream_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    redactor = StreamRedactor()
    shown = redactor.feed(key[:10]) + redactor.feed(key[10:] + " done") + redactor.flush()
    assert shown == f"{REDACTED} done"


secret_text = st.text(alphabet="abcXY-", min_size=MIN_SECRET_CHARS, max_size=14)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(secret_text, min_size=1, max_size=3).flatmap(
        # Sometimes one credential is the start of another.
        lambda values: st.sampled_from([values, [*values, values[0] + "Xb-"]])
    ),
    pieces=st.lists(st.text(alphabet="abcXY- ", max_size=12), max_size=12),
    data=st.data(),
)
def test_stream_redaction_equals_whole_text_redaction(
    values: list[str], pieces: list[str], data: st.DataObject
) -> None:
    # Texts built from the credentials' own letters, with credentials dropped in, so that
    # overlaps, repeats and near-misses are common.
    parts = []
    for piece in pieces:
        parts.append(piece)
        if data.draw(st.booleans()):
            parts.append(data.draw(st.sampled_from(values)))
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    redactor = StreamRedactor(values)
    shown = "".join(redactor.feed(chunk) for chunk in chunks) + redactor.flush()
    assert shown == redact(text, values)
    assert not any(value in shown for value in values)


def windows(text: str, size: int = FRAGMENT_CHARS) -> set[str]:
    return {text[i : i + size] for i in range(len(text) - size + 1)}


def test_what_a_command_makes_of_a_key_is_redacted() -> None:
    """What `rev`, `base64`, `xxd -p`, a URL encoder and two `cut`s print of a line holding the
    key: nothing of 12 characters or more of any of it survives."""
    key = new_key()
    line = f'    "%env ANTHROPIC_API_KEY={key}\\n",\n'
    data = line.encode()
    printed = {
        "rev": line[::-1],
        "cut -c1-40": line[:40] + "\n",
        "cut -c41-": line[40:],
        "urlencode": urllib.parse.quote(line, safe=""),
        "xxd -p": "\n".join(textwrap.wrap(data.hex(), 60)),
        "xxd -p | tr a-f A-F": data.hex().upper(),
    }
    for shift in range(3):  # the key at each of base64's three alignments, wrapped as base64 does
        encoded = base64.b64encode(b"x" * shift + data).decode()
        printed[f"base64 (+{shift})"] = "\n".join(textwrap.wrap(encoded, 76))
        printed[f"base64 -w0 url-safe (+{shift})"] = base64.urlsafe_b64encode(b"x" * shift + data)
    dangerous = windows(key) | windows(key[::-1]) | windows(key.encode().hex())
    for shift in range(3):
        core = base64.b64encode(bytes(shift) + key.encode()).decode()[2 + shift : -4]
        dangerous |= windows(core)
    for how, output in printed.items():
        output = output if isinstance(output, str) else output.decode()
        shown = redact(output, [key])
        assert REDACTED in shown, how
        assert not windows(shown) & dangerous, (how, shown)


def test_a_fragment_of_twelve_characters_is_redacted_and_eleven_is_not() -> None:
    key = new_key()
    assert redact(f"a {key[5:17]} b", [key]) == f"a {REDACTED} b"
    assert redact(f"a {key[5:16]} b", [key]) == f"a {key[5:16]} b"


def test_forms_of_a_short_credential_are_matched_whole() -> None:
    short = "pa55word"  # 8 characters: its forms are redacted whole, not in fragments
    assert {short, short[::-1], short.encode().hex()} <= secret_forms(short)
    assert redact(f"x {short[::-1]} y {short[:6]}", [short]) == f"x {REDACTED} y {short[:6]}"


def test_the_credentials_of_a_url_are_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    password = "s3cr%40t-" + random_secrets.token_hex(6)
    url = f"http://proxyuser:{password}@proxy.example:8080/v1"
    assert url_credentials(url) == [
        f"proxyuser:{password}",
        password,
        urllib.parse.unquote(password),
    ]
    assert url_credentials("http://host:8080/") == [] and url_credentials(None) == []
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    error = f"Could not reach {url}: connection refused"
    assert (
        redact(error)
        == f"Could not reach http://{REDACTED}@proxy.example:8080/v1: connection refused"
    )
    assert urllib.parse.unquote(password) not in redact(f"pw={urllib.parse.unquote(password)}")


@settings(max_examples=300, deadline=None)
@given(
    value=st.text(alphabet="abcXY-", min_size=MIN_SECRET_CHARS, max_size=20),
    pieces=st.lists(st.text(alphabet="abcXY- 0123456789ef", max_size=12), max_size=10),
    data=st.data(),
)
def test_stream_redaction_equals_whole_text_redaction_for_forms_and_fragments(
    value: str, pieces: list[str], data: st.DataObject
) -> None:
    forms = sorted(secret_forms(value))
    parts = []
    for piece in pieces:
        parts.append(piece)
        if data.draw(st.booleans()):
            form = data.draw(st.sampled_from(forms))
            start = data.draw(st.integers(0, len(form)))
            parts.append(form[start : data.draw(st.integers(start, len(form)))])
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    redactor = StreamRedactor([value])
    shown = "".join(redactor.feed(chunk) for chunk in chunks) + redactor.flush()
    assert shown == redact(text, [value])
    assert not any(window in shown for form in forms for window in windows(form))


def test_two_runs_of_one_key_with_a_gap_are_both_redacted() -> None:
    key = new_key()
    text = f"{key[:20]}#{key[21:]}"  # one character changed: two fragments in line
    assert redact(text, [key]) == f"{REDACTED}#{REDACTED}"
