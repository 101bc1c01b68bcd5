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
    return [json.loads(line) for line in session.transcript.path.read_text().splitlines()]


def test_the_session_refuses_what_the_settings_refuse(workspace):
    from evo_magic.compact.policy import CompactPolicy
    from evo_magic.session import Session

    session = Session(workspace, model="offline")
    with pytest.raises(ValueError, match="sandbox must be one of") as made:
        Session(workspace, model="offline", sandbox="bogus")
    with pytest.raises(ValueError, match="sandbox must be one of") as assigned:
        session.sandbox = "bogus"
    assert str(made.value) == str(assigned.value)
    assert session.sandbox == "warn"
    with pytest.raises(ValueError, match="CompactPolicy.max_failures must be at least 1"):
        CompactPolicy(max_failures=0)
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        session.max_turns = 0
    with pytest.raises(TypeError, match="unknown setting"):
        Session(workspace, model="offline", max_turn=3)


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
    assert session.policy == CompactPolicy(context_limit=9_000) == session.compactor.policy
    assert session.cache == CacheSettings(ttl="1h") and session.max_tokens == 1_000


def test_the_compactor_owns_the_policy(workspace: Path):
    session = Session(workspace, model="offline")
    session.policy = CompactPolicy(keep_recent=1)
    assert session.compactor.policy is session.policy is session.settings.policy
    assert [s.keep_recent for s in session.strategies if s.name == "micro"] == [1]


def test_settings_are_recorded_at_the_start_and_when_they_change(workspace: Path):
    session = Session(workspace, model="offline", sandbox="off", bash_timeout=30)
    session.sandbox = "require"
    session.sandbox = "require"  # no change, no record
    session.system = "Be brief."
    session.system = ""  # back to the default prompt
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
    changed = settings.with_changes(max_turns=3, keep_recent=1)
    assert (changed.max_turns, changed.policy.keep_recent) == (3, 1)
    assert settings.max_turns == 30 and settings.policy == CompactPolicy()
    names = {f.name for _, f in setting_fields()}
    assert {f.name for f in fields(CompactPolicy)} <= names


def test_none_is_the_default_for_policy_and_cache(tmp_path):
    from evo_magic.compact.policy import CompactPolicy
    from evo_magic.prompt_cache import CacheSettings
    from evo_magic.session import Session

    with Session(tmp_path, model="offline", policy=None, cache=None) as session:
        assert session.policy == CompactPolicy()
        assert session.cache == CacheSettings()
