"""One setting as a dataclass field: its default, help text and rule, written once.

`setting(...)` makes the field; `check_fields(obj)` applies every field's rule in a frozen
dataclass's `__post_init__`. `SessionSettings` and `CompactPolicy` are made of such fields, and
the notebook's traits, `Session(...)`'s keywords and the README's table are read from them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import Field, field, fields
from typing import Any

Check = Callable[[Any], Any]
"""A setting's own rule beyond type, minimum and choices: the value (normalised) or
ValueError saying what is wrong and what would do."""

TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "int | None": (int, type(None)),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "frozenset[str]": (frozenset, set, list, tuple),
    "tuple[str, ...]": (tuple, list),
}
"""What each annotation of a setting accepts (the annotations are strings here); a setting
of another type is checked by its own `check`."""


def setting(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    choices: Sequence[str] = (),
    check: Check | None = None,
) -> Any:
    """A dataclass field that is a setting: `default`, one line of `help`, and its rule (a
    number at least `minimum`, one of `choices`, or `check`)."""
    metadata = {"help": help, "minimum": minimum, "choices": tuple(choices), "check": check}
    if isinstance(default, dict | frozenset | list):
        empty = type(default)
        return field(default_factory=lambda: empty(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def is_setting(f: Field[Any]) -> bool:
    return "help" in f.metadata


def default_of(f: Field[Any]) -> Any:
    """The field's default value (a new one for a factory)."""
    return f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]


def check_value(owner: str, f: Field[Any], value: Any) -> Any:
    """`value` for the setting `f` of `owner` (normalised), or ValueError naming the setting,
    what it must be and what it got."""
    name = f"{owner}.{f.name}"
    accepted = TYPES.get(str(f.type))
    wrong_type = accepted is not None and (
        not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted)
    )
    if wrong_type:
        raise ValueError(f"{name} must be {f.type}, got {value!r}")
    minimum = f.metadata.get("minimum")
    if minimum is not None and value is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
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
    if str(f.type) == "frozenset[str]":
        value = frozenset(value)
    elif str(f.type) == "tuple[str, ...]":
        value = tuple(value)
    return value


def check_fields(obj: Any) -> None:
    """Check (and normalise) every setting of the frozen dataclass `obj`; ValueError on the
    first bad one."""
    owner = type(obj).__name__
    for f in fields(obj):
        if is_setting(f):
            object.__setattr__(obj, f.name, check_value(owner, f, getattr(obj, f.name)))
