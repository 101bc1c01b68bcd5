"""The magics: `%%agent`, `%agent <subcommand>` and `%compact`. They parse and delegate.

Their options and help are their `magic_arguments` (one text per option, shown by `%agent?`);
the settings are `notebook/config.py` (`%config AgentMagics.<name>`), the sessions and their
meters `notebook/sessions.py`, what the subcommands show `notebook/views.py`, and the core
`Session` does the work.
"""

from __future__ import annotations

import difflib
import inspect
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from evo_magic.models import ModelError
from evo_magic.notebook import summary_edit
from evo_magic.notebook.cell import CellView
from evo_magic.notebook.config import AgentConfig, ConfigTable
from evo_magic.notebook.sessions import DEFAULT_SESSION, CellResult, Sessions
from evo_magic.notebook.views import StrategiesTable, context_text, sessions_text
from evo_magic.render import plural
from evo_magic.session import ObserverError
from evo_magic.settings import SessionSettings
from evo_magic.tools import ToolError
from evo_magic.transcript import TranscriptWriteError

SUBCOMMANDS = {
    "context": "the context meter, the CompactState and the numbers (--live: a meter widget "
    "that follows the session; --save FILE: also the chart as a figure, .svg, .png or .pdf)",
    "reset": "start the session afresh (history and compaction state; transcript continues)",
    "history": "the current history as a DataFrame, one row per content block",
    "transcripts": "the session's transcripts as DataFrames (blocks, calls, compactions)",
    "config": "every setting, its value and default",
    "sessions": "the sessions of this kernel",
    "last": "the result of the session's last %%agent cell",
    "strategies": "the registered compaction strategies with their parameters, and what the "
    "session's next call runs",
    "summaries": "every summary a compaction applied: when, strategy, focus, edited, the text",
    "pin": "pin TEXT (or --file PATH) into every request, verbatim, whatever the strategies do",
    "unpin": "unpin ID: no compaction carries that pin any more",
    "pins": "the session's pinned texts and their ids",
}
"""The line form's subcommands: their one description (the `subcommand` argument's help)."""
_TAKES_WORDS = ("pin", "unpin")


class AgentCellError(Exception):
    """A %%agent cell failed (e.g. the API failed after retries). Shown without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentError: {self}"]


class AgentInterrupted(KeyboardInterrupt):
    """The user interrupted a cell; shown as one line, and it still stops "Run all". The one
    place a cell says so: its view leaves out the loop's "interrupted" notice."""

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


@dataclass(frozen=True)
class CompactArgs:
    """What a `%compact` line asks for."""

    session: str = DEFAULT_SESSION
    focus: str | None = None
    strategy: str | None = None
    preview: bool = False
    edit: bool = False
    apply: bool = False
    apply_file: str | None = None


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
            session = self.registry.get(DEFAULT_SESSION)
            return self._pin(session, "pin", line.split()[1:], line)
        opts = parse_argstring(self.agent, line)
        if cell is None:
            return self._subcommand(opts)
        if opts.subcommand:
            raise UsageError(
                "%%agent takes only options on its first line; the task goes in the cell "
                f"body (got {' '.join(opts.subcommand)!r}). See %%agent?"
            )
        task = self.shell.var_expand(cell) if opts.expand else cell
        if not task.strip():
            raise UsageError("%%agent: the cell is empty; write the task below the magic line.")
        if opts.max_turns is not None:
            try:  # the setting's own rule, before anything runs
                SessionSettings(max_turns=opts.max_turns)
            except ValueError as exc:
                raise UsageError(f"%%agent --max-turns: {exc}") from None
        if opts.out is not None and not opts.out.isidentifier():
            raise UsageError(f"%%agent: --out needs a variable name, got {opts.out!r}")
        return self._run_cell(opts, task)

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

    # -- %%agent ---------------------------------------------------------------------------

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
            raise AgentInterrupted(_kept(session)) from None  # the one place it is said
        except (ModelError, ObserverError, TranscriptWriteError) as exc:
            cell.error = str(exc)
            raise AgentCellError(f"{_sentence(str(exc))} {_sentence(_kept(session))}") from None
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

    # -- %agent SUBCOMMAND -----------------------------------------------------------------

    def _subcommand(self, opts: Any) -> Any:
        words = opts.subcommand
        name = words[0] if words else "context"
        if name not in SUBCOMMANDS:
            close = difflib.get_close_matches(name, SUBCOMMANDS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UsageError(
                f"%agent: unknown subcommand {name!r}.{hint} Choose one of: "
                f"{', '.join(SUBCOMMANDS)}; run a task with %%agent in a cell. See %agent?"
            )
        if len(words) > 1 and name not in _TAKES_WORDS:
            raise UsageError(f"%agent {name} takes no arguments besides -s SESSION")
        if opts.live and name != "context":
            raise UsageError(f"%agent {name}: --live is for %agent context only")
        if opts.save and name != "context":
            raise UsageError(f"%agent {name}: --save is for %agent context only")
        registry = self.registry
        if name == "sessions":
            print(sessions_text(registry))
            return None
        if name == "config":
            return ConfigTable(self)
        if name == "strategies":
            return StrategiesTable(registry.sessions.get(opts.session))
        if name in ("pin", "unpin", "pins"):
            return self._pin(registry.get(opts.session), name, words[1:], None)
        session = registry.existing(opts.session)
        if name == "context":
            if opts.save:
                from evo_magic.notebook.meter import save_figure

                save_figure(session, opts.save)
            return self._context(session, live=opts.live)
        if name == "summaries":
            return summary_edit.summaries(session)
        if name == "reset":
            session.reset()
            print(f"session {opts.session!r} reset: empty history and compaction state.")
            return None
        if name == "history":
            from evo_magic.analysis import history_frame

            return history_frame(session.messages)
        if name == "transcripts":
            from evo_magic.analysis import load_transcripts

            return load_transcripts(session.directory)
        if opts.session not in registry.results:
            raise UsageError(f"%agent last: session {opts.session!r} has not run a cell yet")
        return registry.results[opts.session]

    def _pin(self, session: Any, name: str, words: list[str], line: str | None) -> None:
        """%agent pin / unpin / pins (their behaviour is in evo_magic.notebook.pins)."""
        from evo_magic.notebook.pins import pin_words, pins_text, unpin_words

        if name == "pin" and line is not None and words[:1] != ["--file"]:
            words = [line.strip()[len("pin") :].strip()]  # verbatim
        try:
            if name == "pins":
                print(pins_text(session))
            else:
                print((pin_words if name == "pin" else unpin_words)(session, words))
        except (ValueError, KeyError, ToolError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None

    def _context(self, session: Any, live: bool = False) -> None:
        print(context_text(self.registry, session))
        if not self._rich():
            return
        from IPython.display import display

        if live:  # a widget that follows the session while the kernel runs
            display(self.registry.live_meter(session))
        else:  # a snapshot by default: it still shows once the kernel is gone
            from evo_magic.notebook.widget import static_meter

            display(static_meter(session, self.registry.meter_log(session)), raw=True)

    def _rich(self) -> bool:
        if self.display_mode != "auto":
            return self.display_mode == "rich"
        return getattr(self.shell, "kernel", None) is not None


def parse_compact_line(line: str) -> CompactArgs:
    """`%compact` arguments -> CompactArgs.

    The options (`%compact?` lists them; `--` ends them) are parsed by the magic's own
    parser; the rest of the line is the focus, word for word: `focus=` in front is dropped,
    and a focus in quotes (`focus="..."`) loses its quotes. UsageError for an unterminated
    quote, a second focus, or words outside the quoted focus.
    """
    parser = AgentMagics.compact.parser
    options: list[str] = []
    words = _words(line)
    start = len(line)
    for begin, word in words:
        if word == "--":
            start = next(words, (len(line), ""))[0]
            break
        if not word.startswith("-"):
            start = begin
            break
        options.append(word)
        action = parser._option_string_actions.get(word.partition("=")[0])
        if action is not None and action.nargs != 0 and "=" not in word:
            options.extend(_unquoted(value) for _, value in [next(words, (0, ""))] if value)
    opts = parser.parse_args([_unquoted(word) for word in options])
    modes = [m for m in ("preview", "edit", "apply", "apply_file") if getattr(opts, m)]
    if len(modes) > 1:
        shown = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise UsageError(f"%compact: {shown} do not go together; choose one")
    return CompactArgs(
        opts.session,
        _focus(line[start:].strip()),
        opts.strategy,
        opts.preview,
        opts.edit,
        opts.apply,
        opts.apply_file,
    )


def _words(line: str) -> Iterator[tuple[int, str]]:
    """Each word of `line` with where it starts, read as far as asked (quotes group words,
    as a shell does; the focus after the options is never read this way)."""
    lexer = shlex.shlex(line, posix=False)
    lexer.whitespace_split = True
    position = 0
    while True:
        try:
            word = lexer.get_token()
        except ValueError:
            raise UsageError(
                f"%compact: unterminated quote in {line.strip()!r}; close it, or leave the "
                "quotes out"
            ) from None
        if not word:
            return
        start = line.index(word, position)
        position = start + len(word)
        yield start, word


def _unquoted(word: str) -> str:
    """An option's value without the quotes around it (`"sliding-window(keep=2)"`)."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1]
    return word


def _focus(text: str) -> str | None:
    """The focus of the line's rest: `focus=` dropped, one pair of quotes around it removed;
    UsageError for a second `focus=`, an unterminated quote or words outside the quotes."""
    named = text.startswith("focus=")
    text = text.removeprefix("focus=")
    if " focus=" in f" {text}":
        stray = "a second focus=" if named else "words before focus="
        raise UsageError(
            f"%compact: {stray} in {text!r}; give one focus, last: %compact [options] focus=TEXT"
        )
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        if end == -1:
            raise UsageError(
                f"%compact: the focus opens a {quote} quote that is not closed; close it, or "
                "leave the quotes out (focus=TEXT takes the rest of the line)"
            )
        if text[end + 1 :].strip():
            raise UsageError(
                f"%compact: {text[end + 1 :].strip()!r} after the quoted focus; put it inside "
                "the quotes or leave it out"
            )
        text = text[1:end]
    return text.strip() or None


def usage(magic: Any) -> str:
    """The magic's usage line, as its `magic_arguments` make it (one line)."""
    return " ".join(magic.parser.format_usage().replace("::", "").split())


def magics_markdown() -> str:
    """The README's table of magics, from their `magic_arguments` and `SUBCOMMANDS` (a test
    checks the README holds this text)."""
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


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Raise a UsageError of a subclass (a SettingError) as a UsageError itself: IPython shows
    exactly that class as one line, and a subclass with its whole traceback."""
    try:
        yield
    except UsageError as exc:
        if type(exc) is UsageError:
            raise
        raise UsageError(str(exc)) from None


def _kept(session: Any) -> str:
    return (
        f"the history is kept ({plural(len(session.messages), 'message')}); the next cell "
        "continues the conversation."
    )


def _sentence(text: str) -> str:
    """`text` as one sentence: capitalised, ending with exactly one full stop."""
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def load(ipython: Any) -> None:
    """Register the magics on `ipython` (once)."""
    if any(isinstance(m, AgentMagics) for m in ipython.configurables):
        return
    ipython.register_magics(AgentMagics(ipython))


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


__all__ = ["AgentMagics", "CellResult", "CompactArgs", "load", "parse_compact_line", "unload"]
