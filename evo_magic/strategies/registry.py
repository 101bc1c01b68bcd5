"""Finding strategies by name: the built-ins, other packages' plug-ins, and dotted paths.

A spec is a strategy object, or a string: a registered name (`"micro"`), a dotted path to a
class or factory (`"mylab.strategies.KeepLastTurns"`), or either with keyword arguments in call
syntax, literals only (`"micro(keep_recent=5, exclude_tools=['read_file'])"`,
`"mylab.KeepLastTurns(n=2)"`). A bare name that is neither registered nor importable is looked
up in an optional namespace (a notebook's variables), so a class defined in a cell works too.

Other packages register strategies with an entry point in the group `evo_magic.strategies`,
as simonw/llm does with its plugins::

    [project.entry-points."evo_magic.strategies"]
    keep-last-turns = "mylab.strategies:KeepLastTurns"

`describe` and `rebuild` are one pair: a strategy as the record a transcript keeps, and the
strategy again from that record. A record is data: `rebuild` makes only a registered strategy
(a built-in or an installed entry point, matched by its class's dotted path) and imports
nothing a record names unless it is told to trust the record.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from importlib.metadata import entry_points
from typing import Any

from evo_magic.compact.base import Strategy, check_strategy
from evo_magic.strategies import BUILTIN, MicroCompact

ENTRY_POINT_GROUP = "evo_magic.strategies"


class StrategySpecError(ValueError):
    """A strategy spec that cannot be turned into a strategy; the message says why."""


def registered() -> dict[str, Callable[..., Any]]:
    """Every strategy that can be named: the built-ins, then the entry points of installed
    packages (read on each call, so a package installed since is found)."""
    found: dict[str, Callable[..., Any]] = dict(BUILTIN)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in found:
            found[entry.name] = _LazyEntryPoint(entry)
    return found


def make_strategy(spec: Strategy | str, namespace: Mapping[str, Any] | None = None) -> Strategy:
    """The strategy `spec` names (see the module docstring); StrategySpecError otherwise."""
    if not isinstance(spec, str):
        try:
            return check_strategy(spec)
        except TypeError as exc:
            raise StrategySpecError(str(exc)) from None
    name, kwargs = _parse(spec)
    factory = _resolve(name, namespace)
    try:
        made = factory(**kwargs)
    except TypeError as exc:
        raise StrategySpecError(f"{spec!r}: {exc}") from None
    try:
        return check_strategy(made)
    except TypeError as exc:
        raise StrategySpecError(f"{spec!r}: {exc}") from None


_SPEC = re.compile(r"(?P<name>[A-Za-z_][\w.-]*)\s*(?:\((?P<args>.*)\))?", re.S)


def _parse(spec: str) -> tuple[str, dict[str, Any]]:
    """`name` or `name(key=literal, ...)` -> (name, keyword arguments). Names may hold `-`
    (registered names) and `.` (dotted paths)."""
    match = _SPEC.fullmatch(spec.strip())
    if match is None:
        raise StrategySpecError(
            f"{spec!r} is not a strategy spec: use a name, a dotted path, or either with "
            "keyword arguments, e.g. 'micro(keep_recent=5)'"
        )
    name, args = match["name"], match["args"]
    if args is None or not args.strip():
        return name, {}
    try:
        call = ast.parse(f"f({args})", mode="eval").body
    except SyntaxError:
        raise StrategySpecError(
            f"{spec!r} is not a strategy spec: use a name, a dotted path, or either with "
            "keyword arguments, e.g. 'micro(keep_recent=5)'"
        ) from None
    assert isinstance(call, ast.Call)
    if call.args:
        raise StrategySpecError(
            f"{spec!r}: give keyword arguments only, e.g. 'micro(keep_recent=5)'"
        )
    kwargs: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise StrategySpecError(f"{spec!r}: ** is not allowed; name each argument")
        try:
            kwargs[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            raise StrategySpecError(
                f"{spec!r}: the value of {keyword.arg} must be a literal (a number, a string, "
                "True/False/None, a list, a dict)"
            ) from None
    return name, kwargs


def _resolve(name: str, namespace: Mapping[str, Any] | None) -> Callable[..., Any]:
    known = registered()
    if name in known:
        return known[name]
    if "." in name:
        module_name, _, attribute = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise StrategySpecError(f"cannot import the strategy {name!r}: {exc}") from None
    if namespace is not None and callable(namespace.get(name)):
        return namespace[name]
    raise StrategySpecError(
        f"unknown strategy {name!r}; registered: {', '.join(known)}; or give a dotted path "
        "(package.module.Class)"
    )


class _LazyEntryPoint:
    """An entry point that is imported when first called (listing strategies imports none)."""

    def __init__(self, entry: Any):
        self.entry = entry

    def __call__(self, **kwargs: Any) -> Any:
        return self.load()(**kwargs)

    def load(self) -> Callable[..., Any]:
        return self.entry.load()


@dataclass(frozen=True)
class StrategyInfo:
    """What `%agent strategies` lists for one registered strategy."""

    name: str
    source: str
    """The class or factory's dotted path."""
    when: str
    params: str
    """Its keyword parameters with their defaults, as a call would write them."""
    summary: str


def describe_registered() -> list[StrategyInfo]:
    """The registered strategies with their parameters and one line of description."""
    infos = []
    for name, factory in registered().items():
        target = factory.load() if isinstance(factory, _LazyEntryPoint) else factory
        infos.append(
            StrategyInfo(
                name=name,
                source=_dotted(target),
                when=str(getattr(target, "when", "?")),
                params=_params(target),
                summary=(inspect.getdoc(target) or "").split("\n\n")[0].replace("\n", " "),
            )
        )
    return infos


def _params(target: Callable[..., Any]) -> str:
    if is_dataclass(target):
        parts = []
        for f in fields(target):
            default = f.default
            if default is MISSING and f.default_factory is not MISSING:
                default = f.default_factory()
            shown = sorted(default) if isinstance(default, frozenset) else default
            parts.append(f"{f.name}={shown!r}")
        return ", ".join(parts)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    return ", ".join(
        f"{p.name}={p.default!r}" if p.default is not p.empty else p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


# -- a strategy as a record, and back -----------------------------------------------------


class NotRebuildable(StrategySpecError):
    """A recorded strategy that `rebuild` will not make: not registered (and not trusted), or
    a record it cannot read. The message names it and says why."""


def describe(strategy: Strategy) -> dict[str, Any]:
    """The strategy as a record: name, when, class and parameters (JSON-able). `rebuild`
    makes it again."""
    cls = type(strategy)
    if is_dataclass(strategy):
        params = {f.name: getattr(strategy, f.name) for f in fields(strategy)}
    else:
        params = {k: v for k, v in vars(strategy).items() if not k.startswith("_")}
    return {
        "name": strategy.name,
        "when": strategy.when,
        "class": _dotted(cls),
        "params": {key: _plain(value) for key, value in params.items() if key != "when"},
    }


def rebuild(described: Any, *, trust: bool = False) -> Strategy:
    """The strategy a `describe` record describes: its registered class with its parameters.

    Only a registered strategy is made (a built-in, or an entry point of an installed package
    whose target is the recorded class); anything else raises NotRebuildable without importing
    or calling it, unless `trust` (then the recorded class is imported: only for files you
    wrote). Records of MicroCompact from before it was cache-aware by default rebuild eager.
    """
    if not isinstance(described, Mapping):
        raise NotRebuildable(f"{described!r} is not a strategy record")
    name, path = described.get("name"), described.get("class")
    params = described.get("params") or {}
    if not isinstance(path, str) or not isinstance(params, Mapping):
        raise NotRebuildable(f"the strategy record {name!r} has no class or no parameters")
    if not all(isinstance(key, str) and key.isidentifier() for key in params):
        raise NotRebuildable(f"the strategy record {name!r} has parameters that are not names")
    factory = _registered_class(path)
    if factory is None:
        if not trust:
            raise NotRebuildable(
                f"the strategy {name!r} ({path}) is not a registered strategy, and a recorded "
                "file is data: nothing it names is imported or run. Register it (entry point "
                f"group {ENTRY_POINT_GROUP!r}) or pass trust=True for files you wrote"
            )
        factory = _import(path)
    kwargs = dict(params)
    if factory is MicroCompact:  # recorded before it became cache-aware by default: eager
        kwargs.setdefault("cache_aware", False)
    if "when" in _init_params(factory) and isinstance(described.get("when"), str):
        kwargs["when"] = described["when"]
    try:
        return check_strategy(factory(**kwargs))
    except (TypeError, ValueError) as exc:
        raise NotRebuildable(f"the strategy {name!r} ({path}): {exc}") from None


def _registered_class(path: str) -> Callable[..., Any] | None:
    """The registered strategy whose class (or factory) is at dotted `path`; None if none.
    An entry point is loaded only when its declared target is `path`."""
    for factory in registered().values():
        if isinstance(factory, _LazyEntryPoint):
            if str(factory.entry.value).replace(":", ".") == path:
                return factory.load()
        elif _dotted(factory) == path:
            return factory
    return None


def _import(path: str) -> Callable[..., Any]:
    module_name, _, attribute = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise NotRebuildable(f"cannot import the strategy {path!r}: {exc}") from None


def _dotted(target: Any) -> str:
    return f"{target.__module__}.{getattr(target, '__qualname__', target)}"


def _init_params(factory: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return set()


def _plain(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)
