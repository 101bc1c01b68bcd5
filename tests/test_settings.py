"""SessionSettings: each setting written once, checked by one rule, recorded."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from evo_magic.compact.policy import CompactPolicy
from evo_magic.prompt_cache import CacheSettings
from evo_magic.session import Session
from evo_magic.settings import SessionSettings, setting_fields


def records(session: Session) -> list[dict]:
    return [json.loads(line) for line in session.transcript_path.read_text().splitlines()]


def test_the_session_refuses_what_the_settings_refuse(workspace):
    session = Session(workspace, model="offline")
    with pytest.raises(ValueError, match="sandbox must be one of") as made:
        Session(workspace, model="offline", sandbox="bogus")
    with pytest.raises(ValueError, match="sandbox must be one of") as configured:
        session.configure(sandbox="bogus")
    assert str(made.value) == str(configured.value)
    assert session.settings.sandbox == "warn"
    with pytest.raises(ValueError, match="CompactPolicy.max_failures must be at least 1"):
        CompactPolicy(max_failures=0)
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        session.configure(max_turns=0)
    with pytest.raises(TypeError, match="unknown setting"):
        Session(workspace, model="offline", max_turn=3)


def test_configure_is_refused_whole_and_records_nothing_then(workspace: Path):
    """A bad value among good ones changes nothing: not the good ones, not the strategies, not
    the model; no record is written."""
    from evo_magic.strategies import SlidingWindow

    session = Session(workspace, model="offline")
    before = (session.settings, session.strategies, session.model, len(records(session)))
    for bad in (
        {"max_turns": 0},
        {"sandbox": "bogus"},
        {"strategies": [object()]},
        {"summariser": "not one"},
        {"keep_recent": 1},
    ):
        with pytest.raises((TypeError, ValueError)):
            session.configure(max_tokens=99, strategies=[SlidingWindow(keep=4)], **bad)
        after = (session.settings, session.strategies, session.model, len(records(session)))
        assert after == before, bad
    session.configure(max_tokens=99, strategies=[SlidingWindow(keep=4)])
    assert session.settings.max_tokens == 99
    assert [s.name for s in session.strategies] == ["sliding-window"]
    assert [r["kind"] for r in records(session)][-2:] == ["settings", "strategies"]


def test_every_setting_is_a_session_keyword_with_its_default(workspace: Path):
    for _owner, f in setting_fields():
        default = f.default_factory() if callable(f.default_factory) else f.default
        made = Session(workspace, model="offline", **{f.name: default})
        assert made.settings == Session(workspace, model="offline").settings, f.name
    session = Session(
        workspace,
        model="offline",
        context_limit=9_000,
        cache=CacheSettings(ttl="1h"),
        max_tokens=1_000,
    )
    assert session.policy == CompactPolicy(context_limit=9_000) == session.settings.policy
    assert session.settings.cache == CacheSettings(ttl="1h")
    assert session.settings.max_tokens == 1_000


def test_a_new_policy_applies_to_the_next_call_and_the_pipeline_keeps_its_numbers(
    workspace: Path,
):
    """The policy holds the limits; the default pipeline's numbers are the strategies' own,
    so a new limit leaves the running strategies (and what they know) as they were."""
    session = Session(workspace, model="offline")
    running = session.strategies
    session.configure(context_limit=1_234)
    assert session.policy.context_limit == 1_234 == session.settings.policy.context_limit
    assert session.token_limit is None and session.strategies is running


def test_retired_settings_say_how_to_set_them_now(workspace: Path):
    """0.1's pipeline numbers are the strategies' parameters: naming one as a setting is a
    TypeError that says which strategy's parameter it is and how to set it."""
    with pytest.raises(TypeError) as caught:
        Session(workspace, model="offline", keep_recent=5)
    message = str(caught.value)
    assert "micro strategy's parameter keep_recent" in message
    assert "'micro(keep_recent=5)'" in message
    with pytest.raises(TypeError, match="large-outputs strategy's parameter limit"):
        SessionSettings().with_changes(large_output_limit=1_000)


def test_the_setters_of_0_1_still_work_one_version_and_say_what_replaces_them(workspace: Path):
    from evo_magic.strategies import SlidingWindow

    session = Session(workspace, model="offline")
    with pytest.warns(DeprecationWarning, match=r"session.configure\(max_turns=...\)"):
        session.max_turns = 7
    with pytest.warns(DeprecationWarning, match=r"session.configure\(strategies=...\)"):
        session.strategies = [SlidingWindow(keep=4)]
    with pytest.warns(DeprecationWarning, match=r"read session.settings.max_turns"):
        assert session.max_turns == 7
    assert session.settings.max_turns == 7
    assert [s.name for s in session.strategies] == ["sliding-window"]
    with pytest.raises(ValueError), pytest.warns(DeprecationWarning):
        session.max_turns = 0  # checked as configure checks it
    assert session.settings.max_turns == 7


def test_settings_are_recorded_at_the_start_and_when_they_change(workspace: Path):
    session = Session(workspace, model="offline", sandbox="off", bash_timeout=30)
    session.configure(sandbox="require")
    session.configure(sandbox="require")  # no change, no record
    session.configure(system_prompt="Be brief.")
    session.configure(system_prompt="")  # back to the default prompt
    kinds = [r["kind"] for r in records(session)]
    assert kinds == ["session_start", "settings", "settings", "settings", "settings"]
    start, first, *changes = records(session)
    assert start["system"] == session.system and "careful coding agent" in start["system"]
    assert first["settings"] == {
        name: json.loads(json.dumps(getattr(session.settings, name)))
        for name in (
            "max_tokens",
            "bash_timeout",
            "sandbox",
            "bash_env_keep",
            "bash_env_drop",
            "sandbox_network",
            "sandbox_tmp_size",
            "bash_memory",
            "bash_processes",
            "bash_file_size",
            "cache_diagnosis",
        )
    } | {"sandbox": "off", "bash_timeout": 30}
    assert [c["settings"] for c in changes] == [
        {"sandbox": "require"},
        {"system_prompt": "Be brief."},
        {"system_prompt": ""},
    ]
    assert "careful coding agent" in session.system


def test_settings_is_one_frozen_value():
    settings = SessionSettings()
    with pytest.raises(AttributeError):
        settings.max_turns = 3  # type: ignore[misc]
    changed = settings.with_changes(max_turns=3, context_limit=1)
    assert (changed.max_turns, changed.policy.context_limit) == (3, 1)
    assert settings.max_turns == 30 and settings.policy == CompactPolicy()
    names = {f.name for _, f in setting_fields()}
    assert {f.name for f in fields(CompactPolicy)} <= names


def test_none_is_the_default_for_policy_and_cache(tmp_path):
    from evo_magic.compact.policy import CompactPolicy
    from evo_magic.prompt_cache import CacheSettings
    from evo_magic.session import Session

    with Session(tmp_path, model="offline", policy=None, cache=None) as session:
        assert session.policy == CompactPolicy()
        assert session.settings.cache == CacheSettings()
