"""The notebook's settings: `%config AgentMagics.<name> = value` (or `c.AgentMagics.<name>` in
ipython_config.py).

The session's settings are not written here: each trait is made from a `SessionSettings` or
`CompactPolicy` field (name, type, default, help) and checked by that field's rule the moment
it is set, so a bad value is refused at `%config` time and the setting keeps its value. Only
what belongs to the notebook (which model, where sessions work, how cells display, which
strategies by spec) is declared here.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import Field
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from traitlets import Any as TraitAny
from traitlets import (
    Bool,
    Dict,
    Float,
    Int,
    List,
    TraitError,
    TraitType,
    Unicode,
    Union,
    observe,
    validate,
)
from traitlets.config import Configurable

from evo_magic.declared import check_value, default_of
from evo_magic.models import DEFAULT_MODEL
from evo_magic.secrets import redact
from evo_magic.settings import RETIRED, SessionSettings, retired_message, setting_fields

SESSION_SETTINGS = [f.name for _, f in setting_fields()]


class SettingError(UsageError, TraitError):
    """A setting refused: a UsageError for the user, a TraitError for traitlets (so `%config`
    keeps the old value and says why)."""


def trait_for(f: Field[Any]) -> TraitType:
    """The configurable trait of a setting field: its type, default and help."""
    default, help_text = default_of(f), f.metadata["help"]
    kind = str(f.type)
    if kind in ("frozenset[str]", "tuple[str, ...]"):
        names = sorted(default) if kind.startswith("frozenset") else list(default)
        return List(Unicode(), default_value=names, help=help_text).tag(config=True)
    if kind == "int | float | None":  # a count, or a share (token_limit)
        trait = Union([Int(), Float()], default_value=default, allow_none=True, help=help_text)
        return trait.tag(config=True)
    scalars: dict[str, type[TraitType]] = {
        "int": Int,
        "int | None": Int,
        "float": Float,
        "bool": Bool,
        "str": Unicode,
    }
    trait = scalars.get(kind) or (Dict if "Mapping" in kind else None)
    if trait is None:
        raise TypeError(f"no trait for the setting {f.name} of type {kind}: add one here")
    allow_none = "None" in kind
    return trait(default_value=default, allow_none=allow_none, help=help_text).tag(config=True)


# The session's settings as traits, made from their fields: no setting is written twice.
SessionTraits = type(
    "SessionTraits",
    (Configurable,),
    {
        "__doc__": "The traits of every SessionSettings and CompactPolicy field.",
        **{f.name: trait_for(f) for _, f in setting_fields()},
        # Settings of 0.1 that are strategy parameters now: refused, saying how to set them.
        **{
            name: TraitAny(None, allow_none=True, help="Retired: " + retired_message(name)).tag(
                config=True
            )
            for name in RETIRED
        },
    },
)


def workspace_problem(value: str) -> str | None:
    """Why `value` cannot be the workspace setting (None: it can): the agent works in it, so it
    must be an existing directory ('' is the kernel's working directory)."""
    if value and not os.path.isdir(os.path.expanduser(value)):
        return f"must be an existing directory ('' for the kernel's cwd), got {value!r}"
    return None


def transcripts_root_problem(value: str) -> str | None:
    """Why `value` cannot be the transcripts_root setting (None: it can): a directory, or a
    path where one can be made (a session makes the missing folders), so neither a file nor a
    path under one."""
    path = Path(value).expanduser()
    # '.' exists, so a relative path always has an existing ancestor.
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if not value or existing is None or existing.is_dir():
        return None
    shown = value if existing == path else str(existing)
    return f"must be a directory or where one can be made, got {value!r}: {shown!r} is a file"


PATH_RULES = {"workspace": workspace_problem, "transcripts_root": transcripts_root_problem}
"""The rule of each path setting, checked when it is set (and the workspace again when a
session is made in it: a directory can go away)."""


class AgentConfig(SessionTraits):  # type: ignore[misc, valid-type]
    """Every setting of the magics: the session's (from `SessionSettings`) and the notebook's."""

    model = Unicode(
        "",
        help=f"Claude model name. Empty: {DEFAULT_MODEL} when ANTHROPIC_API_KEY is set, "
        "else the offline model.",
    ).tag(config=True)
    offline = Bool(False, help="Use the offline scripted stand-in instead of Claude.").tag(
        config=True
    )
    workspace = Unicode(
        "",
        help="Directory the agent works in (new sessions); it must exist. Empty: the kernel's cwd.",
    ).tag(config=True)
    transcripts_root = Unicode(
        "",
        help="Where transcripts go (new sessions): a directory, made when missing. Empty: "
        "<workspace>/.evo_magic.",
    ).tag(config=True)
    display_mode = Unicode(
        "auto", help="rich: HTML updated in place; plain: streamed text; auto: rich under a kernel."
    ).tag(config=True)
    strategies = List(
        [],
        help="Compaction strategies, cheapest first: registered names, dotted paths, with "
        "keyword arguments in call syntax ('micro(keep_recent=5)'), or strategy objects. "
        "Empty: the seed's pipeline (large-outputs, micro, summarise). List them and their "
        "parameters with %agent strategies.",
    ).tag(config=True)

    NOTEBOOK_SETTINGS = ("model", "offline", "workspace", "transcripts_root", "display_mode")

    def __init__(self, **kwargs: Any):
        self._made: tuple[list[Any], list[Any]] = ([], [])
        super().__init__(**kwargs)

    # -- checked when set -----------------------------------------------------------------

    def _load_config(self, cfg: Any, section_names: Any = None, traits: Any = None) -> None:
        """Load the settings (from `%config` or ipython_config.py); a bad one is refused and
        said (logged, as `%config` says it), and the others still apply."""
        try:
            super()._load_config(cfg, section_names, traits)
            return
        except TraitError:
            pass  # traitlets rolled back every setting of this load: load them one by one
        for name, trait in (self.traits(config=True) if traits is None else traits).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "not recognized": the others, said above
                try:
                    super()._load_config(cfg, section_names, {name: trait})
                except TraitError as exc:
                    logging.error(str(exc))

    @validate(*SESSION_SETTINGS)
    def _check_setting(self, proposal: Any) -> Any:
        name, value = proposal.trait.name, proposal.value
        f = next(f for _, f in setting_fields() if f.name == name)
        try:
            check_value("AgentMagics", f, value)  # the field's own rule
            SessionSettings().with_changes(**{name: value})  # and what SessionSettings adds
        except Exception as exc:  # whatever a rule raises, the value is refused whole
            message = str(exc) if isinstance(exc, TypeError | ValueError) else repr(exc)
            if not message.startswith(f"AgentMagics.{name}"):
                message = f"AgentMagics.{name}: {message}"
            raise SettingError(f"{message}. The setting is unchanged.") from None
        return value

    @validate(*RETIRED)
    def _refuse_retired(self, proposal: Any) -> Any:
        name = proposal.trait.name
        raise SettingError(f"AgentMagics.{retired_message(name, proposal.value)}")

    @validate("display_mode")
    def _check_display_mode(self, proposal: Any) -> Any:
        if proposal.value not in ("auto", "rich", "plain"):
            raise SettingError(
                f"AgentMagics.display_mode must be 'auto', 'rich' or 'plain', got "
                f"{proposal.value!r}. The setting is unchanged."
            )
        return proposal.value

    @validate("workspace", "transcripts_root")
    def _check_path(self, proposal: Any) -> Any:
        name, value = proposal.trait.name, proposal.value
        problem = PATH_RULES[name](value)
        if problem:
            raise SettingError(f"AgentMagics.{name} {problem}. The setting is unchanged.")
        return value

    @validate("strategies")
    def _check_strategies(self, proposal: Any) -> Any:
        specs = list(proposal.value)
        try:
            self._made = (specs, self.make_strategies(specs, "AgentMagics.strategies"))
        except SettingError as exc:
            raise SettingError(f"{exc} The setting is unchanged.") from None
        return proposal.value

    @observe(*SESSION_SETTINGS, "strategies", "model", "offline")
    def _setting_changed(self, change: Any) -> None:
        self.settings_changed(model_changed=change.name in ("model", "offline"))

    def settings_changed(self, model_changed: bool = False) -> None:
        """Called when a session setting changed (the magics apply it to every session)."""

    # -- what the settings describe --------------------------------------------------------

    def session_settings(self, **changes: Any) -> SessionSettings:
        """The SessionSettings the traits describe (with `changes`); ValueError when bad."""
        values = {name: getattr(self, name) for name in SESSION_SETTINGS}
        values.update(changes)
        return SessionSettings().with_changes(**values)

    def configured_strategies(self) -> list[Any] | None:
        """The strategies `strategies` names (None: the default pipeline), made when set."""
        specs, made = self._made
        if list(self.strategies) != specs:  # e.g. set before the magics existed
            self._made = (list(self.strategies), self.make_strategies(self.strategies))
        return self._made[1] or None

    def make_strategies(self, specs: list[Any], option: str = "AgentMagics.strategies") -> list:
        """Strategy objects for `specs` (names in the user's namespace found too);
        SettingError naming `option` when one cannot be made."""
        if not specs:
            return []
        from evo_magic.strategies.registry import StrategySpecError, make_strategy

        namespace = getattr(getattr(self, "shell", None), "user_ns", None)
        try:
            return [make_strategy(spec, namespace) for spec in specs]
        except StrategySpecError as exc:
            raise SettingError(
                f"{option}: {exc}. List the strategies and their parameters with %agent strategies."
            ) from None

    def model_spec(self, cell_model: str | None = None, cell_offline: bool = False) -> str | None:
        """The model a cell runs: its own option, else the settings (None: the default)."""
        if cell_offline:
            return "offline"
        if cell_model:
            return cell_model
        return "offline" if self.offline else (self.model or None)


def notebook_fields() -> list[str]:
    """The notebook's own settings, then the strategies, in the order of the settings table
    (`docs/notebook.md`)."""
    return [*AgentConfig.NOTEBOOK_SETTINGS, "strategies"]


def setting_names() -> list[str]:
    return notebook_fields() + SESSION_SETTINGS


def settings_markdown() -> str:
    """Every setting as the docs' Markdown table (setting, default, meaning): the docs'
    table is this text (a test checks it)."""
    traits = AgentConfig.class_traits(config=True)
    lines = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name in setting_names():
        trait = traits[name]
        help_text = trait.help.replace("|", "\\|")
        lines.append(f"| `{name}` | `{trait.default()!r}` | {help_text} |")
    return "\n".join(lines)


class ConfigTable:
    """The effective configuration, as a table (HTML in Jupyter, text in a terminal)."""

    def __init__(self, config: AgentConfig):
        traits = config.class_traits(config=True)
        # A value as typed (a trait keeps it): shown with every credential known now redacted.
        self.rows = [
            (name, redact(repr(value)), repr(default), traits[name].help, value != default)
            for name in setting_names()
            for value, default in [(getattr(config, name), traits[name].default())]
        ]

    def __repr__(self) -> str:
        width = max(len(name) for name, *_ in self.rows)
        lines = [f"{'setting':<{width}}  value (default) — meaning"]
        for name, value, default, help_text, changed in self.rows:
            mark = "  *changed*" if changed else ""
            lines.append(f"{name:<{width}}  {value} ({default}) — {help_text}{mark}")
        lines.append("set with: %config AgentMagics.<setting> = <value>")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td><code>{name}</code></td><td><code>{html.escape(value)}</code></td>"
            f"<td><code>{html.escape(default)}</code></td><td>{html.escape(help_text)}</td>"
            "</tr>"
            for name, value, default, help_text, _ in self.rows
        )
        return (
            "<table><tr><th>setting</th><th>value</th><th>default</th><th>meaning</th></tr>"
            f"{rows}</table><p>Set with <code>%config AgentMagics.&lt;setting&gt; = value</code>"
            "</p>"
        )


__all__ = ["AgentConfig", "ConfigTable", "SettingError", "settings_markdown"]
