"""The magics: `%%agent`, `%agent <subcommand>` and `%compact`. They parse and delegate.

Their options and help are their `magic_arguments` (one text per option, shown by `%agent?`);
the settings are `notebook/config.py` (`%config AgentMagics.<name>`), the sessions and their
meters `notebook/sessions.py`, the `%agent` subcommands `notebook/subcommands.py` (what they
show `notebook/views.py`), `%compact`'s line `notebook/compact_line.py`, how a magic fails
`notebook/errors.py`, and the core `Session` does the work.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from evo_magic.models import ModelError
from evo_magic.notebook import subcommands, summary_edit
from evo_magic.notebook.cell import CellView
from evo_magic.notebook.compact_line import CompactArgs, read_compact_line
from evo_magic.notebook.config import AgentConfig
from evo_magic.notebook.errors import (
    AgentCellError,
    AgentInterrupted,
    kept,
    one_line_usage_errors,
    sentence,
)
from evo_magic.notebook.experiments import watch_in_kernel
from evo_magic.notebook.sessions import DEFAULT_SESSION, CellResult, Sessions
from evo_magic.notebook.subcommands import SUBCOMMANDS
from evo_magic.observers import ObserverError
from evo_magic.settings import SessionSettings
from evo_magic.transcript import TranscriptWriteError


@magics_class
class AgentMagics(Magics, AgentConfig):
    """Magics that run a context-compacting Claude agent in this kernel."""

    def __init__(self, shell: Any = None, **kwargs: Any):
        self.registry = Sessions(self)
        super().__init__(shell, **kwargs)

    @property
    def sessions(self) -> dict[str, Any]:
        """The kernel's sessions by name."""
        return self.registry.sessions

    @property
    def results(self) -> dict[str, CellResult]:
        return self.registry.results

    def settings_changed(self, model_changed: bool = False) -> None:
        self.registry.configure_all(model_changed)

    # -- the magics --------------------------------------------------------------------------

    @magic_arguments()
    @argument("-s", "--session", default=DEFAULT_SESSION, help="session name (default: default)")
    @argument("-m", "--model", help="Claude model for this cell (default: AgentMagics.model)")
    @argument("--offline", action="store_true", help="use the offline scripted model")
    @argument("-t", "--max-turns", type=int, help="model calls at most, for this cell")
    @argument("-q", "--quiet", action="store_true", help="no live output, only the footer")
    @argument("-o", "--out", metavar="NAME", help="also store the cell's result in this variable")
    @argument(
        "--expand",
        action="store_true",
        help="expand {var} and $var in the cell body (off: code is full of braces)",
    )
    @argument(
        "--live",
        action="store_true",
        help="%%agent context only: a live meter widget that follows the session (it shows "
        "only while the kernel runs)",
    )
    @argument(
        "--save",
        metavar="FILE",
        help="%%agent context only: also save the context chart as a figure (.svg, .png, .pdf)",
    )
    @argument(
        "subcommand",
        nargs="*",
        metavar="SUBCOMMAND",
        help="line form only, one of: "
        + "; ".join(f"{name}: {text}" for name, text in SUBCOMMANDS.items()).replace("%", "%%"),
    )
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Run an agent task (cell form: the cell body is the task, sent as written) or
        inspect and steer a session (line form: `%agent SUBCOMMAND [-s SESSION]`).

        Assistant text streams live, each tool call shows as one line from when it starts
        (click to expand its input and output), compactions show as they happen, and a
        footer sums up. The result is stored as `_agent` (and in NAME with -o). Interrupt the
        kernel to stop: the work so far is kept and the next cell continues the conversation.
        Manual compaction is `%compact` (see `%compact?`); settings are
        `%config AgentMagics.<name> = value` (list them with `%agent config`).
        """
        with one_line_usage_errors():
            return self._agent(line, cell)

    def _agent(self, line: str, cell: str | None) -> Any:
        if cell is None and line.split(maxsplit=1)[:1] == ["pin"]:
            # The text is taken as typed (quotes, apostrophes and all), not split as options.
            return subcommands.pin_line(self.registry, line)
        opts = parse_argstring(self.agent, line)
        if cell is None:
            return subcommands.run(self.registry, self._rich(), opts)
        return self._run_cell(opts, self._task(opts, cell))

    @magic_arguments()
    @argument("-s", "--session", default=DEFAULT_SESSION, help="session name (default: default)")
    @argument(
        "--strategy",
        metavar="SPEC",
        help="run this strategy instead of the configured ones: a name or a spec in call "
        "syntax, quoted or not (summarise-older(keep=10))",
    )
    @argument(
        "--preview",
        action="store_true",
        help="show what the compaction would do (what it replaces, the size before and after; "
        "a summary is a stand-in, no model call) and change nothing",
    )
    @argument(
        "--edit",
        action="store_true",
        help="make the summary this compaction would apply (the real summariser, the same "
        "request) and show it to edit: in Jupyter a text area with Apply and Cancel; in a "
        "terminal it is printed and saved to a file, for --apply or --apply-file",
    )
    @argument(
        "--apply",
        action="store_true",
        help="apply the summary --edit proposed, as it is (recorded as edited)",
    )
    @argument(
        "--apply-file",
        metavar="FILE",
        help="apply the text of FILE as the summary (the proposal, once edited)",
    )
    @argument(
        "--undo",
        action="store_true",
        help="undo the last full compaction: its history and compaction state put back as "
        "they were, byte for byte (recorded; only the last one, once)",
    )
    @argument(
        "focus",
        nargs="*",
        metavar="focus=TEXT",
        help="focus=TEXT, after the options: what the summary must keep. It reaches the "
        "summariser and the new history as typed (no {var} or $var expansion, apostrophes and "
        'backslashes kept); focus="..." in quotes may hold anything but its own quote',
    )
    @no_var_expand
    @line_magic
    def compact(self, line: str) -> Any:
        """Compact the session's whole history now, keeping a focus.

        A line ending in `?` is IPython's help syntax and never reaches %compact: end the
        focus with something else, or quote it (`%compact focus="why?"`).
        """
        with one_line_usage_errors():
            return self._compact(line)

    def _compact(self, line: str) -> Any:
        args = parse_compact_line(line)
        session = self.registry.existing(args.session)
        self.registry.configure(session)
        strategy = None
        if args.strategy:
            (strategy,) = self.make_strategies([args.strategy], "%compact --strategy")
        focus = args.focus
        if args.preview:
            return session.preview(strategy, focus)
        if args.edit:
            return summary_edit.propose(session, focus, strategy, self._rich())
        if args.undo:
            return self._undo(session)
        summary = None
        if args.apply or args.apply_file:
            given = summary_edit.given(session, args.apply_file, focus, strategy)
            summary, focus, strategy = given.summary, given.focus, given.strategy
        meter = self.registry.show_cell_meter(session) if self._rich() else None
        view = CellView(self._rich(), sys.stdout.write)
        unsubscribe = session.subscribe(view)
        try:
            session.compact(focus, strategy, summary=summary)
        finally:
            unsubscribe()
            self.registry.finish_cell_meter(meter)
        view.update()

    def _undo(self, session: Any) -> None:
        view = CellView(self._rich(), sys.stdout.write)
        unsubscribe = session.subscribe(view)
        try:
            session.undo_compaction()
        except ValueError as exc:
            raise UsageError(f"%compact --undo: {exc}") from None
        finally:
            unsubscribe()
        view.update()

    # -- %%agent ---------------------------------------------------------------------------

    def _task(self, opts: Any, cell: str) -> str:
        """The task of a `%%agent` cell; UsageError, before anything runs, for a line or a
        body that cannot run."""
        if opts.subcommand:
            raise UsageError(
                "%%agent takes only options on its first line; the task goes in the cell "
                f"body (got {' '.join(opts.subcommand)!r}). See %%agent?"
            )
        task = self.shell.var_expand(cell) if opts.expand else cell
        if not task.strip():
            raise UsageError("%%agent: the cell is empty; write the task below the magic line.")
        if opts.max_turns is not None:
            try:  # the setting's own rule
                SessionSettings(max_turns=opts.max_turns)
            except ValueError as exc:
                raise UsageError(f"%%agent --max-turns: {exc}") from None
        if opts.out is not None and not opts.out.isidentifier():
            raise UsageError(f"%%agent: --out needs a variable name, got {opts.out!r}")
        return task

    def _run_cell(self, opts: Any, task: str) -> None:
        registry = self.registry
        model = registry.model(opts.model, opts.offline)
        session = registry.get(opts.session, model)
        registry.configure(session, opts.max_turns, model)
        registry.meter_log(session)  # from the session's first cell on, before its first event
        rich = self._rich()
        cell = CellResult(opts.session, task)
        meter = registry.show_cell_meter(session) if rich else None
        view = CellView(rich, sys.stdout.write, quiet=opts.quiet)
        unsubscribe = session.subscribe(view)
        unsubscribe_events = session.subscribe(cell.events.append)
        finished = None
        try:
            result = session.ask(task)
            finished = result.events[-1] if result.events else None
            cell.result, cell.text, cell.stop_reason = result, result.text, result.stop_reason
        except KeyboardInterrupt:
            cell.error = "interrupted"
            raise AgentInterrupted(kept(session)) from None  # the one place it is said
        except (ModelError, ObserverError, TranscriptWriteError) as exc:
            cell.error = str(exc)
            raise AgentCellError(f"{sentence(str(exc))} {sentence(kept(session))}") from None
        finally:
            unsubscribe()
            unsubscribe_events()
            view.finish(finished)
            self._store(cell, opts.out)
            registry.finish_cell_meter(meter)

    def _store(self, cell: CellResult, out: str | None) -> None:
        self.registry.store(cell)
        self.shell.user_ns["_agent"] = cell
        if out:
            self.shell.user_ns[out] = cell

    def _rich(self) -> bool:
        if self.display_mode != "auto":
            return self.display_mode == "rich"
        return getattr(self.shell, "kernel", None) is not None


def parse_compact_line(line: str) -> CompactArgs:
    """`%compact` arguments -> CompactArgs, read by the magic's own parser (see
    `compact_line.read_compact_line`)."""
    return read_compact_line(line, AgentMagics.compact.parser)


def usage(magic: Any) -> str:
    """The magic's usage line, as its `magic_arguments` make it (one line)."""
    return " ".join(magic.parser.format_usage().replace("::", "").split())


def magics_markdown() -> str:
    """The table of magics of the README and the docs, from their `magic_arguments` and
    `SUBCOMMANDS` (`evo_magic.doc_tables`; a test checks the files hold this text)."""
    cell = usage(AgentMagics.agent).replace(" [--live]", "").replace(" [--save FILE]", "")
    cell = cell.replace(" [SUBCOMMAND ...]", "")
    rows = [
        (f"%{cell}", "run the cell body as the next task of the session, sent as written"),
        (usage(AgentMagics.compact), _first_line(AgentMagics.compact.parser.description)),
    ]
    rows += [(f"%agent {name}", text) for name, text in SUBCOMMANDS.items()]
    lines = ["| magic | what it does |", "| --- | --- |"]
    lines += [f"| `{magic}` | {_cell_text(text)} |" for magic, text in rows]
    return "\n".join(lines)


def _first_line(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n")[0]


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|")


_UNWATCH: list[Callable[[], None] | None] = []
"""What stops showing experiments live, per `load` (undone by `unload`)."""


def load(ipython: Any) -> None:
    """Register the magics on `ipython` (once)."""
    if any(isinstance(m, AgentMagics) for m in ipython.configurables):
        return
    ipython.register_magics(AgentMagics(ipython))
    _UNWATCH.append(watch_in_kernel(ipython))


def unload(ipython: Any) -> None:
    """Remove the magics and their configurable; sessions are closed."""
    for magics in [m for m in ipython.configurables if isinstance(m, AgentMagics)]:
        magics.registry.close()
        ipython.configurables.remove(magics)
    manager = ipython.magics_manager
    for kind, names in (("line", ("agent", "compact")), ("cell", ("agent",))):
        for name in names:
            manager.magics[kind].pop(name, None)
    manager.registry.pop("AgentMagics", None)
    while _UNWATCH:
        stop = _UNWATCH.pop()
        if stop is not None:
            stop()


__all__ = ["AgentMagics", "CellResult", "CompactArgs", "load", "parse_compact_line", "unload"]
