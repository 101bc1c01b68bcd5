"""The notebook front end: `%%agent`, `%agent <subcommand>` and `%compact`.

Thin by design: parse arguments, pick the session, apply the configuration, call the core
Session, and show its events. Settings are traitlets (`%config AgentMagics.context_limit = 20000`,
or `c.AgentMagics.context_limit` in ipython_config.py) and apply from the next model call on.
"""

from __future__ import annotations

import difflib
import inspect
import os
import sys
from dataclasses import dataclass, field, fields
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode

from evo_magic.compact.policy import CompactPolicy, policy_help
from evo_magic.cost import PriceTable, price_table
from evo_magic.events import Event
from evo_magic.models import DEFAULT_MODEL, ModelError, default_model_name, resolve_model
from evo_magic.notebook import summary_edit
from evo_magic.notebook.cell import CellView
from evo_magic.notebook.meter import clip, save_figure
from evo_magic.prompt_cache import TTL_SECONDS, CacheSettings
from evo_magic.render import cell_cost, size, usd
from evo_magic.session import ObserverError, Session
from evo_magic.tools import DEFAULT_SANDBOX, SANDBOX_MODES, describe_sandbox
from evo_magic.transcript import TranscriptWriteError

DEFAULT_SESSION = "default"
SUBCOMMANDS = {
    "context": "the context meter, the CompactState and the numbers",
    "reset": "start the session afresh (history and compaction state; transcript continues)",
    "history": "the current history as a DataFrame, one row per content block",
    "transcripts": "the session's transcripts as DataFrames (blocks, calls, compactions)",
    "config": "the effective configuration: every setting, its value and default",
    "sessions": "the sessions of this kernel",
    "last": "the result of the session's last %%agent cell",
    "strategies": "the registered compaction strategies with their parameters, and the session's",
    "summaries": "every summary a compaction applied: when, strategy, focus, edited, the text",
}
_POLICY = CompactPolicy()
_CACHE = CacheSettings()


def _session_default(name: str) -> Any:
    """The default `Session` gives a setting (written once, in its signature)."""
    return inspect.signature(Session).parameters[name].default


def _policy_trait(kind: type, name: str, **kwargs: Any) -> Any:
    """A configurable trait for the CompactPolicy setting `name`: its default and help are the
    policy's own (each setting is written once, in evo_magic.compact.policy)."""
    default = getattr(_POLICY, name)
    if isinstance(default, frozenset):
        default = sorted(default)
    return kind(default_value=default, help=policy_help(name), **kwargs).tag(config=True)


class AgentCellError(Exception):
    """A %%agent cell failed (e.g. the API failed after retries). Shown without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentError: {self}"]


class AgentInterrupted(KeyboardInterrupt):
    """The user interrupted a cell; shown as one line, and it still stops "Run all"."""

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


@dataclass
class CellResult:
    """What one %%agent cell did; also stored as `_agent` in the user namespace."""

    session: str
    task: str
    text: str = ""
    stop_reason: str = ""
    events: list[Event] = field(default_factory=list)
    error: str | None = None
    result: Any = None
    """The core `AskResult` (None when the cell was interrupted or failed)."""

    def __repr__(self) -> str:
        status = self.error or self.stop_reason
        return f"<CellResult session={self.session!r} {status}: {self.text[:80]!r}>"

    def _repr_markdown_(self) -> str:
        return self.text or f"*({self.error or 'no text'})*"


_COMPACT_USAGE = (
    "%compact [-s SESSION] [--strategy NAME] [--preview | --edit | --apply | --apply-file FILE] "
    "[focus=TEXT]"
)


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


def parse_compact_line(line: str) -> CompactArgs:
    """`%compact` arguments -> CompactArgs.

    Options come first (`-s/--session NAME`, `--strategy SPEC`, `--preview`, `--` to end
    them); everything after them is the focus, word for word: `focus=` in front is dropped,
    and one pair of matching quotes around the whole focus is removed. Nothing else is
    interpreted, so apostrophes, backslashes, braces and dollars reach the summariser as typed.
    """
    options: dict[str, Any] = {}
    rest = line.strip()
    while rest.startswith("-"):
        word, _, after = rest.partition(" ")
        if word == "--":
            rest = after.strip()
            break
        if word in ("--preview", "--edit", "--apply"):
            options[word[2:]], rest = True, after.strip()
            continue
        name, has_value, value = word.partition("=")
        key = {
            "-s": "session",
            "--session": "session",
            "--strategy": "strategy",
            "--apply-file": "apply_file",
        }.get(name)
        if key is None:
            raise UsageError(f"%compact: unknown option {word!r}. Use: {_COMPACT_USAGE}")
        if not has_value:
            value, _, after = after.strip().partition(" ")
        if not value:
            raise UsageError(f"%compact: {name} needs a value. Use: {_COMPACT_USAGE}")
        options[key] = value
        rest = after.strip()
    modes = [m for m in ("preview", "edit", "apply", "apply_file") if options.get(m)]
    if len(modes) > 1:
        shown = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise UsageError(f"%compact: {shown} do not go together. Use: {_COMPACT_USAGE}")
    focus = rest.removeprefix("focus=")
    if len(focus) >= 2 and focus[0] == focus[-1] and focus[0] in "\"'":
        focus = focus[1:-1]
    return CompactArgs(focus=focus.strip() or None, **options)


@magics_class
class AgentMagics(Magics):
    """Magics that run a context-compacting Claude agent in this kernel."""

    model = Unicode(
        "",
        help=f"Claude model name. Empty: {DEFAULT_MODEL} when ANTHROPIC_API_KEY is set, "
        "else the offline model.",
    ).tag(config=True)
    offline = Bool(False, help="Use the offline scripted stand-in instead of Claude.").tag(
        config=True
    )
    max_turns = Int(
        _session_default("max_turns"), min=1, help="Model calls per %%agent cell at most."
    ).tag(config=True)
    max_tokens = Int(
        _session_default("max_tokens"), min=1, help="max_tokens of each model call."
    ).tag(config=True)
    workspace = Unicode(
        "", help="Directory the agent works in (new sessions). Empty: the kernel's cwd."
    ).tag(config=True)
    transcripts_root = Unicode(
        "", help="Where transcripts go (new sessions). Empty: <workspace>/.evo_magic."
    ).tag(config=True)
    system_prompt = Unicode("", help="System prompt. Empty: evo_magic's default.").tag(config=True)
    bash_timeout = Float(
        _session_default("bash_timeout"),
        min=1.0,
        help="Seconds before a bash command, and every process it started, is killed.",
    ).tag(config=True)
    sandbox = Enum(
        SANDBOX_MODES,
        DEFAULT_SANDBOX,
        help="Where bash runs when bubblewrap cannot be used: 'require' refuses to run it, "
        "'warn' runs it unsandboxed and says so, 'off' never sandboxes.",
    ).tag(config=True)
    display_mode = Enum(
        ("auto", "rich", "plain"),
        "auto",
        help="rich: HTML updated in place; plain: streamed text; auto: rich under a kernel.",
    ).tag(config=True)
    strategies = List(
        [],
        help="Compaction strategies, cheapest first: registered names, dotted paths, with "
        "keyword arguments in call syntax ('micro(keep_recent=5)'), or strategy objects. "
        "Empty: the seed's pipeline with the numbers below. List them with %agent strategies.",
    ).tag(config=True)
    # CompactPolicy: one trait per number, default and help taken from the policy itself.
    context_limit = _policy_trait(Int, "context_limit", min=1)
    token_limit = _policy_trait(Int, "token_limit", allow_none=True)
    keep_recent = _policy_trait(Int, "keep_recent", min=0)
    min_chars = _policy_trait(Int, "min_chars", min=0)
    placeholder = _policy_trait(Unicode, "placeholder")
    exclude_tools = _policy_trait(List, "exclude_tools", trait=Unicode())
    clear_at_least = _policy_trait(Int, "clear_at_least", min=0)
    cache_aware = _policy_trait(Bool, "cache_aware")
    summary_input_limit = _policy_trait(Int, "summary_input_limit", min=1)
    summary_max_tokens = _policy_trait(Int, "summary_max_tokens", min=1)
    summary_in_context = _policy_trait(Bool, "summary_in_context")
    max_recent_files = _policy_trait(Int, "max_recent_files", min=0)
    large_output_limit = _policy_trait(Int, "large_output_limit", min=1)
    preview_chars = _policy_trait(Int, "preview_chars", min=0)
    max_failures = _policy_trait(Int, "max_failures", min=1)
    # Prompt caching and cost (see evo_magic.prompt_cache.CacheSettings, evo_magic.cost).
    caching = Bool(
        _CACHE.enabled, help="Mark requests for prompt caching (cache_control breakpoints)."
    ).tag(config=True)
    cache_ttl = Enum(
        tuple(TTL_SECONDS), _CACHE.ttl, help="Lifetime of the cache entries requests write."
    ).tag(config=True)
    prices = Dict(
        help="Price overrides, USD per million tokens: {model: {rate: number}}, rates among "
        "input, output, cache_write_5m, cache_write_1h, cache_read. Empty: the shipped table."
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any):
        super().__init__(shell, **kwargs)
        self.sessions: dict[str, Any] = {}
        self.results: dict[str, CellResult] = {}
        self._meters: dict[str, Any] = {}
        self._made: tuple[list[Any], list[Any]] | None = None

    # -- the magics --------------------------------------------------------------------------

    @magic_arguments()
    @argument("-s", "--session", default=DEFAULT_SESSION, help="session name (default: default)")
    @argument("-m", "--model", help="Claude model for this cell (default: AgentMagics.model)")
    @argument("--offline", action="store_true", help="use the offline scripted model")
    @argument("-t", "--max-turns", type=int, help="model calls at most, for this cell")
    @argument("-q", "--quiet", action="store_true", help="no live output, only the footer")
    @argument("-o", "--out", help="also store the cell's result in this variable")
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
    @argument("subcommand", nargs="*", help="line form only: " + ", ".join(SUBCOMMANDS))
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Run an agent task (cell form) or inspect and steer a session (line form).

        Cell form: the cell body is the task, sent as written::

            %%agent [-s SESSION] [-m MODEL] [--offline] [-t N] [-q] [-o NAME] [--expand]
            Find the TODOs in this project and fix the first one.

        Assistant text streams live, each tool call shows as one line (click to expand its
        input and output), compactions show as they happen, and a footer sums up. The result
        is stored as `_agent` (and in NAME with -o). Interrupt the kernel to stop: the work so
        far is kept and the next cell continues the conversation.

        Line form, `%agent SUBCOMMAND [-s SESSION]`:

          context      the context meter, the CompactState and the numbers
                       (--live: a meter widget that follows the session;
                       --save FILE: also the chart as a figure, .svg, .png or .pdf)
          reset        start the session afresh (transcript continues)
          history      the current history as a DataFrame (one row per content block)
          transcripts  the session's transcripts as DataFrames
          config       every setting, its value and default
          sessions     the sessions of this kernel
          last         the result of the session's last %%agent cell
          strategies   the registered compaction strategies and the session's own
          summaries    every summary a compaction applied (when, strategy, edited, text)

        Manual compaction is `%compact [focus=TEXT]` (see `%compact?`). Settings are
        `%config AgentMagics.<name> = value` (list them with `%config AgentMagics`).
        """
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
        if opts.max_turns is not None and opts.max_turns < 1:
            raise UsageError("%%agent: --max-turns must be at least 1")
        if opts.out is not None and not opts.out.isidentifier():
            raise UsageError(f"%%agent: --out needs a variable name, got {opts.out!r}")
        return self._run_cell(opts, task)

    @no_var_expand
    @line_magic
    def compact(self, line: str) -> Any:
        """Compact the session's whole history now, keeping a focus.

            %compact
            %compact focus="the failing test and the fix we chose"
            %compact -s lab focus=keep the {braces} and $dollars literally
            %compact --strategy summarise-older(keep=10) focus=the open questions
            %compact --preview focus=the open questions
            %compact --edit focus=the open questions
            %compact --apply
            %compact --apply-file proposed-summary.md

        The focus reaches the summariser and the new history, word for word: no {var} or $var
        expansion, apostrophes and backslashes kept; one pair of quotes around the whole focus
        is removed. `--strategy` runs that strategy instead of the configured ones;
        `--preview` shows what the compaction would do (what it would replace, the size before
        and after; a summary is a stand-in, no model call) and changes nothing. `--edit` makes
        the summary this compaction would apply (the real summariser, the same request) and
        shows it to edit: in Jupyter a text area with Apply and Cancel; in a terminal it is
        printed and saved to a file, then `--apply` applies it as it is and `--apply-file FILE`
        applies the file once edited. The applied text is recorded as edited. A line
        ending in `?` is IPython's help syntax and never reaches %compact: end the focus with
        something else, or quote it (`%compact focus="why?"`).
        """
        args = parse_compact_line(line)
        session = self._existing_session(args.session)
        self._configure(session, None)
        strategy = self._strategy(args.strategy) if args.strategy else None
        focus = args.focus
        if args.preview:
            return session.preview(strategy, focus)
        if args.edit:
            return summary_edit.propose(session, focus, strategy, self._rich())
        summary = None
        if args.apply or args.apply_file:
            given = summary_edit.given(session, args.apply_file, focus, strategy)
            summary, focus, strategy = given.summary, given.focus, given.strategy
        meter = self._show_meter(session)
        view = CellView(self._rich(), sys.stdout.write)
        unsubscribe = session.subscribe(view)
        try:
            event = session.compact(focus, strategy, summary=summary)
        finally:
            unsubscribe()
            self._update_meter(meter)
        if not event.success and event.error:
            view.show("the history is kept as it was", "notice")
        view.update()

    # -- %%agent ---------------------------------------------------------------------------

    def _run_cell(self, opts: Any, task: str) -> None:
        session = self._session(opts.session)
        self._configure(session, opts)
        self._meter_log(session)  # from the session's first cell on, before its first event
        rich = self._rich()
        cell = CellResult(opts.session, task)
        meter = self._show_meter(session)
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
            view.show(f"Interrupted. {_kept(session)}")
            raise AgentInterrupted(f"Stopped. {_kept(session)}") from None
        except (ModelError, ObserverError, TranscriptWriteError) as exc:
            cell.error = str(exc)
            raise AgentCellError(f"{_sentence(str(exc))} {_kept(session)}") from None
        finally:
            unsubscribe()
            unsubscribe_events()
            view.finish(finished)
            self._store(cell, opts.out)
            self._update_meter(meter)

    def _store(self, cell: CellResult, out: str | None) -> None:
        self.results[cell.session] = cell
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
        if len(words) > 1:
            raise UsageError(f"%agent {name} takes no arguments besides -s SESSION")
        if opts.live and name != "context":
            raise UsageError(f"%agent {name}: --live is for %agent context only")
        if opts.save and name != "context":
            raise UsageError(f"%agent {name}: --save is for %agent context only")
        if name == "sessions":
            return self._sessions_table()
        if name == "config":
            return ConfigTable(self)
        if name == "strategies":
            return StrategiesTable(self.sessions.get(opts.session))
        session = self._existing_session(opts.session)
        if name == "context":
            if opts.save:
                save_figure(session, opts.save)
            return self._context(session, live=opts.live)
        if name == "reset":
            session.reset()
            print(f"session {opts.session!r} reset: empty history and compaction state.")
            return None
        if name == "history":
            from evo_magic.analysis import history_frame

            return history_frame(session.messages)
        if name == "summaries":
            return summary_edit.summaries(session)
        if name == "transcripts":
            from evo_magic.analysis import load_transcripts

            return load_transcripts(session.directory)
        if opts.session not in self.results:
            raise UsageError(f"%agent last: session {opts.session!r} has not run a cell yet")
        return self.results[opts.session]

    def _context(self, session: Any, live: bool = False) -> None:
        state = session.state
        paused = state.consecutive_failures >= session.policy.max_failures
        lines = [
            f"session {session.session_id} · model {session.model.name}"
            + (" (offline scripted stand-in)" if session.model.offline else ""),
            f"context: {size(session.context())} (limit {session.policy.context_limit:,} chars)",
            f"compactions: {state.compact_count}; has_compacted={state.has_compacted}; "
            f"failures in a row: {state.consecutive_failures}"
            + (" — automatic compaction PAUSED" if paused else ""),
            f"recent files: {', '.join(state.recent_files) or 'none'}",
            describe_sandbox(session.sandbox),
            self._cost_line(session),
            f"transcript: {session.transcript.path}",
        ]
        if state.last_summary:
            lines.append(f"last summary: {clip(state.last_summary, 300, one_line=False)}")
        print("\n".join(lines))
        if not self._rich():
            return
        from IPython.display import display

        if live:  # a widget that follows the session while the kernel runs
            display(self._live_meter(session))
        else:  # a snapshot by default: it still shows once the kernel is gone
            from evo_magic.notebook.widget import static_meter

            display(static_meter(session, self._meter_log(session)), raw=True)

    def _cost_line(self, session: Any) -> str:
        """Cost so far, the last cell's, and the cache hit rate of the session's calls."""
        name = next((n for n, s in self.sessions.items() if s is session), None)
        last = self.results.get(name) if name is not None else None
        finished = [e for e in last.events if e.kind == "ask_finished"] if last else []
        cell = usd(cell_cost(finished[-1])) if finished else "-"
        caching = f"caching {session.cache.ttl}" if session.cache.enabled else "caching off"
        return (
            f"cost: {usd(session.cost_usd)} so far, {cell} last cell; cache hit rate "
            f"{session.usage.cache_hit_rate:.0%} ({caching}; prices of {session.prices.as_of})"
        )

    def _sessions_table(self) -> None:
        if not self.sessions:
            print("no sessions yet: run a %%agent cell")
            return
        for name, session in self.sessions.items():
            print(
                f"{name}: {session.session_id}, {size(session.context())}, "
                f"{session.state.compact_count} compactions, model {session.model.name}"
            )

    # -- sessions and settings -------------------------------------------------------------

    def _session(self, name: str) -> Any:
        if name not in self.sessions:
            workspace = os.path.expanduser(self.workspace or os.getcwd())
            if not os.path.isdir(workspace):
                raise UsageError(
                    f"AgentMagics.workspace {workspace!r} is not a directory; "
                    "set it with %config AgentMagics.workspace = '/path'"
                )
            self.sessions[name] = Session(
                workspace,
                model=self._model_spec(None),
                system=self.system_prompt or None,
                policy=self.policy(),
                max_turns=self.max_turns,
                max_tokens=self.max_tokens,
                transcripts_root=self.transcripts_root or None,
                bash_timeout=self.bash_timeout,
                sandbox=self.sandbox,
                cache=self._cache(),
                prices=self._prices(),
            )
        return self.sessions[name]

    def _existing_session(self, name: str) -> Any:
        if name not in self.sessions:
            known = ", ".join(self.sessions) or "none yet"
            raise UsageError(
                f"no session {name!r} (sessions: {known}); run a %%agent cell first"
                + (f" or use -s {next(iter(self.sessions))}" if self.sessions else "")
            )
        return self.sessions[name]

    def policy(self) -> CompactPolicy:
        """The CompactPolicy the current settings describe (one trait per policy field)."""
        try:
            return CompactPolicy(**{f.name: getattr(self, f.name) for f in fields(CompactPolicy)})
        except ValueError as exc:
            raise UsageError(f"AgentMagics settings: {exc}") from None

    def _cache(self) -> CacheSettings:
        return CacheSettings(enabled=self.caching, ttl=self.cache_ttl)

    def _prices(self) -> PriceTable:
        """The price table the `prices` overrides describe (UsageError when they are bad)."""
        try:
            return price_table(self.prices or None)
        except ValueError as exc:
            raise UsageError(f"AgentMagics.prices: {exc}") from None

    def _model_spec(self, opts: Any) -> str | None:
        if opts is not None and opts.offline:
            return "offline"
        if opts is not None and opts.model:
            return opts.model
        if self.offline:
            return "offline"
        return self.model or None

    def _configure(self, session: Any, opts: Any) -> None:
        """Apply the current settings (and this cell's options) from the next call on."""
        session.policy = self.policy()
        session.strategies = self._configured_strategies()
        session.cache = self._cache()
        session.prices = self._prices()
        session.max_tokens = self.max_tokens
        session.bash_timeout = self.bash_timeout
        session.sandbox = self.sandbox
        cell_turns = opts.max_turns if opts is not None else None
        session.max_turns = cell_turns or self.max_turns
        if self.system_prompt:
            session.system = self.system_prompt
        spec = self._model_spec(opts)
        wanted = spec or default_model_name()
        if session.model.name != wanted:
            session.model = resolve_model(wanted)

    def _configured_strategies(self) -> list[Any] | None:
        """The strategies `AgentMagics.strategies` names (None: the default pipeline). Made
        once per setting, so a session keeps its strategy objects from cell to cell."""
        specs = list(self.strategies)
        if not specs:
            return None
        if self._made is None or self._made[0] != specs:
            self._made = (specs, [self._strategy(spec) for spec in specs])
        return self._made[1]

    def _strategy(self, spec: Any) -> Any:
        from evo_magic.strategies.registry import StrategySpecError, make_strategy

        try:
            return make_strategy(spec, self.shell.user_ns)
        except StrategySpecError as exc:
            raise UsageError(f"AgentMagics.strategies: {exc}") from None

    def _rich(self) -> bool:
        if self.display_mode != "auto":
            return self.display_mode == "rich"
        return getattr(self.shell, "kernel", None) is not None

    def _show_meter(self, session: Any) -> tuple[Any, Any] | None:
        """Display a meter of the cell about to run (rich mode): a live widget until
        `_update_meter` replaces it with the cell's final static snapshot."""
        if not self._rich():
            return None
        from IPython.display import display

        from evo_magic.notebook.widget import ContextMeter

        meter = ContextMeter(session, log=self._meter_log(session), scope="cell")
        return meter, display(meter, display_id=True)

    def _meter_log(self, session: Any) -> Any:
        """The session's MeterLog (every meter of the session reads it; kept by the session)."""
        return session.context_log

    def _live_meter(self, session: Any) -> Any:
        """The session's live meter (one widget per session, however often it is shown)."""
        from evo_magic.notebook.widget import ContextMeter

        meter = self._meters.get(session.session_id)
        if meter is None:
            log = self._meter_log(session)
            meter = self._meters[session.session_id] = ContextMeter(session, log=log)
        return meter

    @staticmethod
    def _update_meter(shown: tuple[Any, Any] | None) -> None:
        """Replace a cell's live meter with its final static snapshot (HTML and text, no
        widget view) and close the widget: a widget view needs its kernel, so a notebook
        reopened without one would show "model not found" instead of the meter."""
        if shown is not None:
            meter, handle = shown
            handle.update(meter.finish(), raw=True)
            meter.close()


class ConfigTable:
    """The effective configuration, as a table (HTML in Jupyter, text in a terminal)."""

    def __init__(self, magics: AgentMagics):
        traits = magics.class_traits(config=True)
        self.rows = [
            (name, getattr(magics, name), trait.default(), trait.help)
            for name, trait in sorted(traits.items())
        ]

    def __repr__(self) -> str:
        width = max(len(name) for name, *_ in self.rows)
        lines = [f"{'setting':<{width}}  value (default) — meaning"]
        for name, value, default, help_text in self.rows:
            mark = "" if value == default else "  *changed*"
            lines.append(f"{name:<{width}}  {value!r} ({default!r}) — {help_text}{mark}")
        lines.append("set with: %config AgentMagics.<setting> = <value>")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td><code>{name}</code></td><td><code>{html.escape(repr(value))}</code></td>"
            f"<td><code>{html.escape(repr(default))}</code></td><td>{html.escape(help_text)}</td>"
            "</tr>"
            for name, value, default, help_text in self.rows
        )
        return (
            "<table><tr><th>setting</th><th>value</th><th>default</th><th>meaning</th></tr>"
            f"{rows}</table><p>Set with <code>%config AgentMagics.&lt;setting&gt; = value</code>"
            "</p>"
        )


def settings_markdown() -> str:
    """Every setting as the README's Markdown table (setting, default, meaning), in the order
    the class declares them: the README's table is this text (a test checks it)."""
    traits = AgentMagics.class_traits(config=True)
    names = [name for name in vars(AgentMagics) if name in traits]
    lines = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name in names:
        trait = traits[name]
        help_text = trait.help.replace("|", "\\|")
        lines.append(f"| `{name}` | `{trait.default()!r}` | {help_text} |")
    return "\n".join(lines)


class StrategiesTable:
    """The registered strategies (and the session's own), as text or HTML."""

    def __init__(self, session: Any = None):
        from evo_magic.compact.base import describe
        from evo_magic.strategies.registry import describe_registered

        self.registered = describe_registered()
        self.current = [describe(s) for s in session.strategies] if session is not None else []

    def __repr__(self) -> str:
        lines = ["registered strategies (use in %config AgentMagics.strategies):"]
        for info in self.registered:
            lines.append(f"  {info.name}({info.params})  [{info.when}]  {info.summary}")
        if self.current:
            shown = ", ".join(_call(d) for d in self.current)
            lines.append(f"this session runs: {shown}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td><code>{html.escape(i.name)}</code></td><td>{html.escape(i.when)}</td>"
            f"<td><code>{html.escape(i.params)}</code></td><td>{html.escape(i.summary)}</td></tr>"
            for i in self.registered
        )
        current = (
            "<p>This session runs: "
            + ", ".join(f"<code>{html.escape(_call(d))}</code>" for d in self.current)
            + "</p>"
            if self.current
            else ""
        )
        return (
            "<table><tr><th>name</th><th>when</th><th>parameters (defaults)</th>"
            f"<th>what it does</th></tr>{rows}</table>{current}"
        )


def _call(description: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in description["params"].items())
    return f"{description['name']}({params})"


def _kept(session: Any) -> str:
    n = len(session.messages)
    return (
        f"The history is kept ({n:,} message{'' if n == 1 else 's'}); the next cell continues "
        "the conversation."
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
        for session in magics.sessions.values():
            session.close()
        ipython.configurables.remove(magics)
    manager = ipython.magics_manager
    for kind, names in (("line", ("agent", "compact")), ("cell", ("agent",))):
        for name in names:
            manager.magics[kind].pop(name, None)
    manager.registry.pop("AgentMagics", None)


__all__ = ["AgentMagics", "CellResult", "load", "parse_compact_line", "unload"]
