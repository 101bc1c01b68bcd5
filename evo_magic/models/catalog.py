"""The context windows and features of known models: a view of `evo_magic.catalog`, kept so
that existing imports (``from evo_magic.models.catalog import context_window``) keep working.

The catalog lives in `evo_magic.catalog`, below the models and the prompt cache (which need its
cache minimums and prices); new code imports it from there.
"""

from __future__ import annotations

from evo_magic.catalog import (
    AS_OF,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT_EDIT,
    FEATURES,
    GPT_5_WINDOW,
    LONG,
    MODELS,
    SOURCE,
    SUMMARIZE,
    ModelInfo,
    context_window,
    model_info,
    supports,
)

__all__ = [
    "AS_OF",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT_EDIT",
    "FEATURES",
    "GPT_5_WINDOW",
    "LONG",
    "MODELS",
    "SOURCE",
    "SUMMARIZE",
    "ModelInfo",
    "context_window",
    "model_info",
    "supports",
]
