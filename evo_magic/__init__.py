"""evo_magic: run a context-compacting Claude agent loop inside IPython and Jupyter.

    %load_ext evo_magic

Loading the extension is cheap: the anthropic SDK and pandas are imported on first use. The core
(`Session`, `CompactPolicy`, `load_transcripts`, ...) works in plain Python scripts too.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from evo_magic.version import __version__ as __version__  # re-exported

# Public name -> module that defines it; imported on first access to keep `import` cheap.
_LAZY = {
    "Session": "evo_magic.session",
    "AskResult": "evo_magic.ask_result",
    "SessionSettings": "evo_magic.settings",
    "CompactPolicy": "evo_magic.compact.policy",
    "CompactState": "evo_magic.compact.state",
    "Usage": "evo_magic.usage",
    "Summariser": "evo_magic.summariser",
    "AnthropicModel": "evo_magic.models",
    "FunctionModel": "evo_magic.models",
    "OfflineModel": "evo_magic.models",
    "ModelError": "evo_magic.models",
    "load_transcripts": "evo_magic.analysis",
    "sql": "evo_magic.analysis",
    "formats": "evo_magic.analysis.formats.registry",
    "Engine": "evo_magic.analysis.engine",
    "replay": "evo_magic.analysis.replay",
    "Fact": "evo_magic.analysis.retention",
    "retention": "evo_magic.analysis.retention",
    "experiment": "evo_magic.experiments",
    "Experiment": "evo_magic.experiments",
    "Task": "evo_magic.experiments",
    "tasks": "evo_magic.experiments",
    "after_compaction": "evo_magic.analysis.after_compaction",
    "rewind": "evo_magic.analysis.rewind",
}

__all__ = [*_LAZY, "load_ipython_extension", "unload_ipython_extension"]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on demand
    from evo_magic.analysis import load_transcripts, sql  # noqa: F401
    from evo_magic.analysis.after_compaction import after_compaction  # noqa: F401
    from evo_magic.analysis.engine import Engine  # noqa: F401
    from evo_magic.analysis.formats.registry import formats  # noqa: F401
    from evo_magic.analysis.replay import replay  # noqa: F401
    from evo_magic.analysis.retention import Fact, retention  # noqa: F401
    from evo_magic.ask_result import AskResult  # noqa: F401
    from evo_magic.compact.policy import CompactPolicy  # noqa: F401
    from evo_magic.compact.state import CompactState  # noqa: F401
    from evo_magic.experiments import Experiment, Task, experiment, tasks  # noqa: F401
    from evo_magic.models import AnthropicModel, FunctionModel, ModelError, OfflineModel  # noqa: F401
    from evo_magic.session import Session  # noqa: F401
    from evo_magic.settings import SessionSettings  # noqa: F401
    from evo_magic.summariser import Summariser  # noqa: F401
    from evo_magic.usage import Usage  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'evo_magic' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (`%load_ext evo_magic`)."""
    from evo_magic.notebook.magics import load  # noqa: F401

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics (`%unload_ext evo_magic`)."""
    from evo_magic.notebook.magics import unload  # noqa: F401

    unload(ipython)
