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
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from evo_magic.compact.base import Strategy, check_strategy, parameters_of
from evo_magic.declared import default_of, rule_text
from evo_magic.strategies import BUILTIN, MicroCompact

ENTRY_POINT_GROUP = "evo_magic.strategies"


class StrategySpecError(ValueError):
    """A strategy spec that cannot be turned into a strategy; the message says why."""


def registered() -> dict[str, Callable[..., Any]]:
    """Every strategy that can be named: the built-ins, then the entry points of installed
    packages (read on each call, so a package installed since is found)."""
    # Imported here: importlib.metadata costs ~20 ms, and `%load_ext` imports this module.
    from importlib.metadata import entry_points

    found: dict[str, Callable[..., Any]] = dict(BUILTIN)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in found:
            found[entry.name] = _LazyEntryPoint(entry)
    return found


def make_strategy(spec: Strategy | str, namespace: Mapping[str, Any] | None = None) -> Strategy:
    """The strategy `spec` names (see the module docstring); StrategySpecError otherwise,
    saying which spec, which parameter and which rule."""
    if not isinstance(spec, str):
        try:
            return check_strategy(spec)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # an object's own attributes may raise anything: refused
            detail = str(exc) if isinstance(exc, TypeError | ValueError) else repr(exc)
            raise StrategySpecError(detail) from None
    name, kwargs = _parse(spec)
    return _construct(_resolve(name, namespace), kwargs, repr(spec))


def _construct(factory: Callable[..., Any], kwargs: dict[str, Any], label: str) -> Strategy:
    """`factory(**kwargs)`, checked: the one path by which a spec or a record becomes a
    strategy. Whatever the strategy's own checks raise, the result is a StrategySpecError
    (`label`: what to name in it), so a setting made of specs is refused whole."""
    target = factory.load() if isinstance(factory, _LazyEntryPoint) else factory
    known = _parameter_names(target)
    unknown = sorted(set(kwargs) - known) if known is not None else []
    if unknown:
        shown = getattr(target, "name", None) or _dotted(target)
        listed = ", ".join(sorted(known or ())) or "none"
        raise StrategySpecError(
            f"{label}: {shown} has no parameter {', '.join(unknown)} (its parameters: {listed})"
        )
    try:
        made = target(**kwargs)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a strategy's own check may raise anything: refused, said once
        detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise StrategySpecError(f"{label}: {detail}") from None
    try:
        return check_strategy(made)
    except TypeError as exc:
        raise StrategySpecError(f"{label}: {exc}") from None


def _parameter_names(target: Callable[..., Any]) -> set[str] | None:
    """The keyword parameters `target` takes (None when it takes any)."""
    if is_dataclass(target):
        return {f.name for f in fields(target) if f.init}
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


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
class Parameter:
    """One parameter of a strategy: its name, default, help and rule in words."""

    name: str
    default: Any
    help: str = ""
    rule: str = ""


@dataclass(frozen=True)
class StrategyInfo:
    """What `%agent strategies` and the tables list for one registered strategy."""

    name: str
    dotted: str
    """The class or factory's dotted path."""
    when: str
    parameters: tuple[Parameter, ...]
    summary: str
    source: str = ""
    """Where the strategy comes from (a paper, a system), as the class declares it."""

    @property
    def params(self) -> str:
        """Its keyword parameters with their defaults, as a call would write them."""
        return ", ".join(f"{p.name}={_shown(p.default)}" for p in self.parameters)


def describe_registered() -> list[StrategyInfo]:
    """The registered strategies with their parameters and one line of description."""
    infos = []
    for name, factory in registered().items():
        target = factory.load() if isinstance(factory, _LazyEntryPoint) else factory
        infos.append(
            StrategyInfo(
                name=name,
                dotted=_dotted(target),
                when=str(getattr(target, "when", "?")),
                parameters=_parameters(target),
                summary=_first_sentence(inspect.getdoc(target) or ""),
                source=str(getattr(target, "source", "")),
            )
        )
    return infos


def _parameters(target: Callable[..., Any]) -> tuple[Parameter, ...]:
    """The parameters of a strategy class: its declared fields (with help and rule), or the
    signature of any other factory (defaults only)."""
    if is_dataclass(target):
        found = []
        for f in fields(target):
            if not f.init:
                continue
            default = default_of(f)
            help_text = f.metadata.get("help", "")
            found.append(Parameter(f.name, default, help_text, rule_text(f) if help_text else ""))
        return tuple(found)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return ()
    return tuple(
        Parameter(p.name, p.default if p.default is not p.empty else None)
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def _first_sentence(doc: str) -> str:
    """The first sentence of a docstring, on one line."""
    paragraph = doc.split("\n\n")[0].replace("\n", " ")
    return paragraph.split(". ")[0].rstrip(".") + "."


def _shown(value: Any) -> str:
    if isinstance(value, frozenset | set):
        return repr(sorted(value))
    return repr(value)


def strategies_markdown() -> str:
    """The built-in and registered strategies as a Markdown table (name, when, parameters with
    their defaults, what it does, source): the docs' table is this text (`evo_magic.doc_tables`; a
    test checks it)."""
    lines = [
        "| name | when | parameters (defaults) | what it does | source |",
        "| --- | --- | --- | --- | --- |",
    ]
    for info in describe_registered():
        if info.dotted.split(".")[0] != "evo_magic":
            continue  # another package's plug-in: listed by %agent strategies, not here
        cells = [f"`{info.name}`", info.when, f"`{info.params}`", info.summary, info.source]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


# -- a strategy as a record, and back -----------------------------------------------------


class NotRebuildable(StrategySpecError):
    """A recorded strategy that `rebuild` will not make: not registered (and not trusted), or
    a record it cannot read. The message names it and says why."""


def describe(strategy: Strategy) -> dict[str, Any]:
    """The strategy as a record: name, when, class and parameters (JSON-able). `rebuild`
    makes it again."""
    return {
        "name": strategy.name,
        "when": strategy.when,
        "class": _dotted(type(strategy)),
        "params": {key: _plain(value) for key, value in parameters_of(strategy).items()},
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
    kwargs = {key: _legacy_spec(value) for key, value in params.items()}
    if factory is MicroCompact:  # recorded before it became cache-aware by default: eager
        kwargs.setdefault("cache_aware", False)
    takes = _parameter_names(factory)
    if (takes is None or "when" in takes) and isinstance(described.get("when"), str):
        kwargs["when"] = described["when"]
    try:
        return _construct(factory, kwargs, f"the strategy {name!r} ({path})")
    except StrategySpecError as exc:
        raise NotRebuildable(str(exc)) from None


_REPR = re.compile(r"(?P<cls>[A-Z]\w*)\((?P<args>.*)\)", re.S)


def _legacy_spec(value: Any) -> Any:
    """A parameter as records written before strategies were recorded as specs hold it: a
    strategy (a fallback) as its repr, `Summarise(when='over_limit', ...)`. When the class
    is a built-in one, its spec (`summarise(when='over_limit', ...)`), read as any spec
    (literals only, nothing imported); any other value as it is."""
    match = _REPR.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return value
    for name, cls in BUILTIN.items():
        if cls.__name__ == match["cls"]:
            return f"{name}({match['args']})"
    return value


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


def _plain(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if _is_strategy(value):  # a fallback: the spec that makes it again
        return spec_of(value)
    return repr(value)


def _is_strategy(value: Any) -> bool:
    try:
        check_strategy(value)
    except TypeError:
        return False
    return True


def spec_of(strategy: Strategy) -> str:
    """The spec that makes `strategy` again (`make_strategy(spec_of(s))`): its registered
    name (else its class's dotted path) with every parameter that differs from its default,
    literals only."""
    name = strategy.name if strategy.name in registered() else _dotted(type(strategy))
    return _call(name, strategy)


def shown(strategy: Strategy) -> str:
    """`strategy` as a person reads it: its name with the parameters that differ from its
    defaults (`micro(keep_recent=5)`)."""
    return _call(strategy.name, strategy)


def _call(name: str, strategy: Strategy) -> str:
    described = describe(strategy)
    defaults = {p.name: _plain(p.default) for p in _parameters(type(strategy))}
    changed = {
        key: value
        for key, value in described["params"].items()
        if key not in defaults or defaults[key] != value
    }
    if "when" in defaults and strategy.when != defaults["when"]:
        changed["when"] = strategy.when
    arguments = ", ".join(f"{key}={value!r}" for key, value in changed.items())
    return f"{name}({arguments})" if arguments else name
