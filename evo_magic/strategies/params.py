"""Rules the built-in strategies' parameters share (the `check` of their declared fields).

Each returns the value (normalised) or raises ValueError saying what would do; the declared
field's name is added by `evo_magic.declared.check_value`.
"""

from __future__ import annotations

from typing import Any

from evo_magic.compact.base import WHENS
from evo_magic.declared import setting

# -- parameters several strategies declare alike ---------------------------------------------


def calls_ahead_parameter() -> Any:
    """The cache-aware rule's horizon (`Context.clearing_pays`), as every strategy that clears
    declares it."""
    return setting(
        10,
        "Cache-aware: the model calls expected while the cleared tokens would otherwise stay.",
        minimum=0,
    )


def when_parameter() -> Any:
    """When a strategy that replaces the history runs: over the limit (and on request), or
    only on request."""
    return setting(
        "over_limit",
        "When it runs: over the limit (and on request), or only on request.",
        choices=("over_limit", "on_request"),
    )


# -- rules ------------------------------------------------------------------------------------


def non_empty(value: str) -> str:
    """A text that is not blank."""
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def share(value: float) -> float:
    """A share strictly between 0 and 1."""
    if not 0 < value < 1:
        raise ValueError(f"must be a share between 0 and 1 (exclusive), got {value!r}")
    return value


def shares(values: tuple[float, ...]) -> tuple[float, ...]:
    """Shares strictly between 0 and 1, sorted."""
    for value in values:
        share(value)
    return tuple(sorted(values))


def when(value: str) -> str:
    """One of the scheduling points a strategy can run at."""
    if value not in WHENS:
        raise ValueError(f"must be one of {', '.join(map(repr, WHENS))}, got {value!r}")
    return value


def formats_lines(value: str) -> str:
    """A placeholder that may name `{lines}` and nothing else to fill in."""
    non_empty(value)
    try:
        value.format(lines=1)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"must be a text whose only field is {{lines}} (double other braces), got "
            f"{value!r} ({type(exc).__name__}: {exc})"
        ) from None
    return value


def tool_inputs(value: Any) -> bool | frozenset[str]:
    """True/False for every tool, or a list of tool names."""
    if isinstance(value, bool):
        return value
    if isinstance(value, list | tuple | set | frozenset) and all(
        isinstance(name, str) for name in value
    ):
        return frozenset(value)
    raise ValueError(f"must be True, False or a list of tool names, got {value!r}")


def client_fallback(value: Any) -> Any:
    """A client strategy (an object or a spec such as "summarise") to run instead of a server
    strategy the model or the API does not offer; None: none."""
    if value is None:
        return None
    # The registry imports the built-in strategies, this module among their helpers.
    from evo_magic.strategies.registry import StrategySpecError, make_strategy

    try:
        fallback = make_strategy(value)
    except StrategySpecError as exc:
        raise ValueError(str(exc)) from None
    if callable(getattr(fallback, "server_edit", None)):
        raise ValueError(f"must be a client strategy, not {fallback.name!r}")
    return fallback
