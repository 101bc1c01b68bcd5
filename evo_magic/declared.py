"""A declared value: a dataclass field carrying its default, its help and its rule, written once.

`setting(...)` makes the field; `check_fields(obj)` applies every declared field's rule (in a
dataclass's `__post_init__`, so a value is checked when it is made, by one path), and redacts
every credential the session knows from a text value there: where a configured text enters.
The session's settings (`SessionSettings`, `CompactPolicy`) and every built-in strategy's
parameters are such fields: the notebook's traits, `Session(...)`'s keywords, `%agent
strategies` and the docs' tables (`docs/notebook.md`, `docs/strategies.md`) are all read
from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, field, fields
from typing import Any

from evo_magic.secrets import redact

Check = Callable[[Any], Any]
"""A value's own rule beyond type, bounds and choices: the value (normalised) or ValueError
saying what is wrong and what would do."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _strings(value: Any) -> bool:
    return isinstance(value, list | tuple | set | frozenset) and all(
        isinstance(item, str) for item in value
    )


def _numbers(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(_is_number(item) for item in value)


TYPES: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "int | None": lambda v: v is None or _is_int(v),
    "float": _is_number,
    "float | None": lambda v: v is None or _is_number(v),
    "int | float | None": lambda v: v is None or _is_number(v),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "str | None": lambda v: v is None or isinstance(v, str),
    "frozenset[str]": _strings,
    "tuple[str, ...]": lambda v: _strings(v) and not isinstance(v, set | frozenset),
    "tuple[float, ...]": _numbers,
}
"""What each annotation of a declared field accepts (annotations are strings in modules with
`from __future__ import annotations`); a field of another type is checked by its own `check`."""

NORMALISE: dict[str, Callable[[Any], Any]] = {
    "frozenset[str]": frozenset,
    "tuple[str, ...]": tuple,
    "tuple[float, ...]": lambda v: tuple(float(x) for x in v),
}
"""The one form a value of each annotation is kept in (a list given for a tuple, ...)."""

WORDS: dict[str, str] = {
    "int": "a whole number",
    "int | None": "a whole number or None",
    "float": "a number",
    "float | None": "a number or None",
    "int | float | None": "a number or None",
    "bool": "True or False",
    "str": "a text",
    "str | None": "a text or None",
    "frozenset[str]": "a list of texts",
    "tuple[str, ...]": "a list of texts",
    "tuple[float, ...]": "a list of numbers",
}


def setting(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: Sequence[Any] = (),
    check: Check | None = None,
    rule: str = "",
) -> Any:
    """A dataclass field that is declared: `default`, one line of `help`, and its rule (a number
    within `minimum`..`maximum`, one of `choices`, and/or `check`). `rule` says in words what
    `check` accepts, for the tables (the bounds and choices say themselves)."""
    metadata = {
        "help": help,
        "minimum": minimum,
        "maximum": maximum,
        "choices": tuple(choices),
        "check": check,
        "rule": rule,
    }
    if isinstance(default, dict | frozenset | list | set):
        empty = type(default)
        return field(default_factory=lambda: empty(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def mirror(owner: Any, name: str) -> Any:
    """A declared field that is the declared field `name` of the dataclass `owner` under
    another name (its default, help and rule, not written again): a setting that configures a
    part the session builds, e.g. the policy's `summary_max_tokens` for the summariser's
    `max_tokens`."""
    f = next(f for f in fields(owner) if f.name == name and is_declared(f))
    meta = f.metadata
    return setting(
        default_of(f),
        meta["help"],
        minimum=meta["minimum"],
        maximum=meta["maximum"],
        choices=meta["choices"],
        check=meta["check"],
        rule=meta["rule"],
    )


def is_declared(f: Field[Any]) -> bool:
    """True for a field made by `setting`."""
    return "help" in f.metadata


def declared_fields(owner: Any) -> list[Field[Any]]:
    """The declared fields of a dataclass (or of an instance of one), in order."""
    return [f for f in fields(owner) if is_declared(f)]


def default_of(f: Field[Any]) -> Any:
    """The field's default value (a new one for a factory)."""
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def rule_text(f: Field[Any]) -> str:
    """The field's rule in words: its type, bounds, choices and own rule ("" when nothing
    but its type is asked)."""
    parts = []
    minimum, maximum = f.metadata.get("minimum"), f.metadata.get("maximum")
    if minimum is not None and maximum is not None:
        parts.append(f"{_number(minimum)} to {_number(maximum)}")
    elif minimum is not None:
        parts.append(f">= {_number(minimum)}")
    elif maximum is not None:
        parts.append(f"<= {_number(maximum)}")
    if f.metadata.get("choices"):
        parts.append("one of " + ", ".join(repr(c) for c in f.metadata["choices"]))
    if f.metadata.get("rule"):
        parts.append(f.metadata["rule"])
    return "; ".join(parts)


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def check_value(owner: str, f: Field[Any], value: Any) -> Any:
    """`value` for the declared field `f` of `owner` (normalised), or ValueError naming
    `owner.field`, what it must be and what it got."""
    name = f"{owner}.{f.name}"
    kind = str(f.type)
    accepts = TYPES.get(kind)
    if accepts is not None and not accepts(value):
        raise ValueError(f"{name} must be {WORDS[kind]}, got {value!r}")
    minimum, maximum = f.metadata.get("minimum"), f.metadata.get("maximum")
    if minimum is not None and value is not None and value < minimum:
        raise ValueError(f"{name} must be at least {_number(minimum)}, got {value!r}")
    if maximum is not None and value is not None and value > maximum:
        raise ValueError(f"{name} must be at most {_number(maximum)}, got {value!r}")
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        valid = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {valid}, got {value!r}")
    check = f.metadata.get("check")
    if check is not None:
        try:
            value = check(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        except (ArithmeticError, TypeError, LookupError, AttributeError) as exc:
            # A rule's own code may fail on an odd value (an int too large for a float):
            # the value is refused like any other, never stored.
            raise ValueError(f"{name}: {type(exc).__name__}: {exc}") from None
    normalise = NORMALISE.get(kind)
    value = normalise(value) if normalise is not None and value is not None else value
    return _redacted(value)


def _redacted(value: Any) -> Any:
    """A text setting (or each text of a collection of them) with every credential the
    session knows redacted: a key typed into a system prompt or a placeholder would go into
    every request, every display of the settings and every settings record."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, tuple | frozenset) and all(isinstance(v, str) for v in value):
        return type(value)(redact(v) for v in value)
    return value


def check_fields(obj: Any, owner: str | None = None) -> None:
    """Check (and normalise) every declared field of the dataclass `obj` (frozen or not);
    ValueError naming `owner.field` (default: the class's name) on the first bad one."""
    owner = owner or type(obj).__name__
    for f in declared_fields(obj):
        object.__setattr__(obj, f.name, check_value(owner, f, getattr(obj, f.name)))
