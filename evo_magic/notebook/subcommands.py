"""`%agent SUBCOMMAND`: inspect and steer a session from a line.

`TABLE` is the one list of subcommands: each one's help (the `subcommand` argument's help in
`%agent?` and the rows of the magics table are made from it), its handler, and what it takes besides
`-s SESSION`. A handler gets the parsed line as a `Call` and returns what the cell shows.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from evo_magic.notebook import summary_edit
from evo_magic.notebook.config import ConfigTable
from evo_magic.notebook.experiments import ExperimentsTable
from evo_magic.notebook.pins import pin_words, pins_text, unpin_words
from evo_magic.notebook.sessions import DEFAULT_SESSION, Sessions
from evo_magic.notebook.views import StrategiesTable, context_text, sessions_text

if TYPE_CHECKING:  # the core loads with the first session, not with %load_ext
    from evo_magic.session import Session

DEFAULT = "context"
"""What a bare `%agent` shows."""
OPTIONS = ("live", "save")
"""The options some subcommands take (`--live`, `--save FILE`); `Subcommand.options` says who."""


@dataclass(frozen=True)
class Call:
    """One `%agent SUBCOMMAND` line, parsed: the words after the name and the options."""

    registry: Sessions
    rich: bool
    session: str = DEFAULT_SESSION
    words: tuple[str, ...] = ()
    live: bool = False
    save: str | None = None

    def existing(self) -> Session:
        """The session named; UsageError when it has not run a cell."""
        return self.registry.existing(self.session)

    def made(self) -> Session:
        """The session named, made from the settings when it is new."""
        return self.registry.get(self.session)


@dataclass(frozen=True)
class Subcommand:
    """One row of the table: what it does, its handler, and what it takes."""

    help: str
    run: Callable[[Call], Any]
    takes_words: bool = False
    options: tuple[str, ...] = ()


def _context(call: Call) -> None:
    session = call.existing()
    if call.save:
        from evo_magic.notebook.views import save_figure

        save_figure(session, call.save)
    print(context_text(call.registry, session))
    if not call.rich:
        return
    from IPython.display import display

    if call.live:  # a widget that follows the session while the kernel runs
        display(call.registry.live_meter(session))
    else:  # a snapshot by default: it still shows once the kernel is gone
        from evo_magic.notebook.widget import static_meter

        display(static_meter(session, call.registry.meter_log(session)), raw=True)


def _reset(call: Call) -> None:
    call.existing().reset()
    print(f"session {call.session!r} reset: empty history and compaction state.")


def _history(call: Call) -> Any:
    from evo_magic.analysis import history_frame

    return history_frame(call.existing().messages)


def _transcripts(call: Call) -> Any:
    from evo_magic.analysis import load_transcripts

    return load_transcripts(call.existing().directory)


def _sessions(call: Call) -> None:
    print(sessions_text(call.registry))


def _last(call: Call) -> Any:
    call.existing()
    if call.session not in call.registry.results:
        raise UsageError(f"%agent last: session {call.session!r} has not run a cell yet")
    return call.registry.results[call.session]


def _strategies(call: Call) -> StrategiesTable:
    return StrategiesTable(call.registry.sessions.get(call.session))


def _pin(call: Call) -> None:
    _say(pin_words, call.made(), call.words)


def _unpin(call: Call) -> None:
    _say(unpin_words, call.made(), call.words)


def _pins(call: Call) -> None:
    _say(lambda session, _words: pins_text(session), call.made(), call.words)


def _say(action: Callable[[Session, list[str]], str], session: Session, words: Any) -> None:
    """Print what a pin subcommand did; what it refused is a UsageError (the pins module's
    message, without the quotes a KeyError adds)."""
    from evo_magic.tools import ToolError

    try:
        print(action(session, list(words)))
    except (ValueError, KeyError, ToolError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None


TABLE: dict[str, Subcommand] = {
    "context": Subcommand(
        "the context meter, the CompactState and the numbers (--live: a meter widget that "
        "follows the session; --save FILE: also the chart as a figure, .svg, .png or .pdf)",
        _context,
        options=("live", "save"),
    ),
    "reset": Subcommand(
        "start the session afresh (history and compaction state; transcript continues)", _reset
    ),
    "history": Subcommand(
        "the current history as a DataFrame, one row per content block", _history
    ),
    "transcripts": Subcommand(
        "the session's transcripts as DataFrames (blocks, calls, compactions)", _transcripts
    ),
    "config": Subcommand(
        "every setting, its value and default", lambda call: ConfigTable(call.registry.config)
    ),
    "sessions": Subcommand("the sessions of this kernel", _sessions),
    "last": Subcommand("the result of the session's last %%agent cell", _last),
    "strategies": Subcommand(
        "the registered compaction strategies with their parameters, and what the session's "
        "next call runs",
        _strategies,
    ),
    "summaries": Subcommand(
        "every summary a compaction applied: when, strategy, focus, edited, the text",
        lambda call: summary_edit.summaries(call.existing()),
    ),
    "pin": Subcommand(
        "pin TEXT (or --file PATH) into every request, verbatim, whatever the strategies do",
        _pin,
        takes_words=True,
    ),
    "unpin": Subcommand(
        "unpin ID: no compaction carries that pin any more", _unpin, takes_words=True
    ),
    "pins": Subcommand("the session's pinned texts and their ids", _pins),
    "experiment": Subcommand(
        "the experiments of this kernel (evo_magic.experiment): runs done, failed and left",
        lambda call: ExperimentsTable(),
    ),
}
SUBCOMMANDS = {name: subcommand.help for name, subcommand in TABLE.items()}
"""Each subcommand's one description, by name (the `subcommand` argument's help)."""


def run(registry: Sessions, rich: bool, opts: Any) -> Any:
    """Run the `%agent` line `opts` (parsed by the magic's arguments): its subcommand, or
    `context` when it names none."""
    name, *words = opts.subcommand or [DEFAULT]
    subcommand = _lookup(name)
    if words and not subcommand.takes_words:
        raise UsageError(f"%agent {name} takes no arguments besides -s SESSION")
    for option in OPTIONS:
        if getattr(opts, option) and option not in subcommand.options:
            takers = " or ".join(f"%agent {n}" for n, s in TABLE.items() if option in s.options)
            raise UsageError(f"%agent {name}: --{option} is for {takers} only")
    call = Call(registry, rich, opts.session, tuple(words), opts.live, opts.save)
    return subcommand.run(call)


def _lookup(name: str) -> Subcommand:
    if name in TABLE:
        return TABLE[name]
    close = difflib.get_close_matches(name, TABLE, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UsageError(
        f"%agent: unknown subcommand {name!r}.{hint} Choose one of: {', '.join(TABLE)}; run a "
        "task with %%agent in a cell. See %agent?"
    )


def pin_line(registry: Sessions, line: str) -> None:
    """`%agent pin TEXT`, the line as typed: the text keeps its quotes, apostrophes and spaces
    (it is not split as options), in the default session; `%agent pin --file PATH` as words."""
    words = line.split()[1:]
    if words[:1] != ["--file"]:
        words = [line.strip()[len("pin") :].strip()]  # verbatim
    _say(pin_words, registry.get(DEFAULT_SESSION), words)


__all__ = ["SUBCOMMANDS", "TABLE", "Call", "Subcommand", "pin_line", "run"]
