"""Context windows by model: what replay flags a prompt against."""

from __future__ import annotations

import pytest

from evo_magic.models.catalog import context_window


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", 200_000),
        ("claude-opus-4-6", 1_000_000),
        ("claude-sonnet-4-6", 1_000_000),
        ("claude-opus-5", 1_000_000),
        ("claude-fable-5-1", 1_000_000),
        ("gpt-5", 400_000),
        ("gpt-5-codex", 400_000),
        ("gpt-5.1-codex-max", 400_000),
        ("gpt-4o", None),
        ("someone-elses-model", None),
        ("", None),
    ],
)
def test_context_windows(model: str, window: int | None):
    assert context_window(model) == window
