"""A model's id to its family's: the one rule every lookup of the catalog goes through
(`evo_magic.catalog`), so that a dated, cloud or router id finds the same row for every figure.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["model_family"]

_CONTEXT_TAG = re.compile(r"\[[^\]]*\]$")  # "claude-sonnet-5-5[1m]"
_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|au|jp|global)\.(?=anthropic\.)")
_VENDOR_PREFIX = re.compile(r"^(?:anthropic[./])")
_VERTEX_DATE = re.compile(r"@\d{8}$")  # "claude-sonnet-4-5@20250929"
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")  # "...-20250929-v1:0"
_SNAPSHOT_DATE = re.compile(r"-\d{8}$")  # "claude-sonnet-4-5-20250929"
_OPENAI_DATE = re.compile(r"^(gpt-.*)-\d{4}-\d{2}-\d{2}$")  # "gpt-5-2025-08-07"
_OPENAI_VENDOR = re.compile(r"^openai/")  # "openai/gpt-5" (routers)
_MAJOR_ALIAS = re.compile(r"^(claude-[a-z]+-\d+)-0$")  # "claude-opus-4-0" is Opus 4
_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")  # "claude-sonnet-4.5" (OpenRouter)
_GPT_HYPHEN_MINOR = re.compile(r"^(gpt-\d+)-(\d)(?=-|$)")  # "gpt-5-1-codex" is gpt-5.1-codex
_GEMINI_PREVIEW = re.compile(r"^(gemini-.*?)-(?:preview|exp)(?:-[\d-]+)?$")
_KIMI_K2_SNAPSHOT = re.compile(r"^kimi-k2-(?:\d{4}-preview|instruct(?:-\d{4})?)$")
_ALIASES = {"deepseek-v3": "deepseek-chat", "deepseek-r1": "deepseek-reasoner"}


@lru_cache(maxsize=1024)  # a pure function asked once per call and lookup; ids are few
def model_family(model: str) -> str:
    """The family id of ``model``: lower case, without snapshot date or platform decorations.

    ``claude-sonnet-4-5-20250929``, ``anthropic.claude-sonnet-4-5-20250929-v1:0``,
    ``claude-sonnet-4-5@20250929`` and ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` all give
    ``claude-sonnet-4-5``; the alias ``claude-opus-4-0`` gives ``claude-opus-4``; ``openai/gpt-5``
    and ``gpt-5-2025-08-07`` give ``gpt-5``. Only whole, known decorations are removed, so a
    dated id never lands on a neighbouring model (``claude-fable-5-20260609`` is Fable 5, not
    Fable 5.2). A router's or gateway's prefix is dropped (``converse/jp.anthropic.claude-
    haiku-4-5-20251001-v1:0`` is ``claude-haiku-4-5``, ``openrouter/anthropic/claude-sonnet-4.5``
    ``claude-sonnet-4-5``), as are OpenAI's hyphenated minor version (``gpt-5-1-codex-2025-11-13``
    is ``gpt-5.1-codex``), Gemini's ``-preview`` tags and Kimi K2's snapshot names. Every lookup
    of the catalog, and the price table, maps ids through this.
    """
    # A router's or gateway's prefix ("openrouter/anthropic/", "converse/", "google/") names
    # no model: ids themselves hold no "/".
    family = model.strip().lower().rsplit("/", 1)[-1]
    family = _CONTEXT_TAG.sub("", family)
    family = _REGION_PREFIX.sub("", family)
    family = _VENDOR_PREFIX.sub("", family)
    family = _VERTEX_DATE.sub("", family)
    family = _BEDROCK_VERSION.sub("", family)
    family = _SNAPSHOT_DATE.sub("", family)
    family = _MAJOR_ALIAS.sub(r"\1", family)
    family = _OPENAI_DATE.sub(r"\1", _OPENAI_VENDOR.sub("", family))
    family = family.removesuffix("-latest")
    if family.startswith("claude-"):
        family = _CLAUDE_DOT.sub("-", family)
    family = _GPT_HYPHEN_MINOR.sub(r"\1.\2", family)
    family = _GEMINI_PREVIEW.sub(r"\1", family)
    family = "kimi-k2" if _KIMI_K2_SNAPSHOT.match(family) else family
    return _ALIASES.get(family, family)
