"""The notebook front end: `%%agent`, `%agent <subcommand>` and `%compact`.

Thin by design: parse arguments, pick the session, apply the configuration, call the core
Session, and show its events. Settings are traitlets (`%config AgentMagics.context_limit = 20000`,
or `c.AgentMagics.context_limit` in ipython_config.py) and apply from the next model call on.
"""

from __future__ import annotations

import difflib
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode

from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import PriceTable, price_table
from evo_magic.events import Event
from evo_magic.models import DEFAULT_MODEL, ModelError, default_model_name, resolve_model
from evo_magic.notebook.cell import CellView
from evo_magic.prompt_cache import TTL_SECONDS, CacheSettings
from evo_magic.render import cell_cost, size, usd

DEFAULT_SESSION = "default"
SUBCOMMANDS = {
    "context": "the context meter, the CompactState and the numbers",
    "reset": "start the session afresh (history and compaction state; transcript continues)",
    "history": "the current history as a DataFrame, one row per content block",
    "transcripts": "the session's transcripts as DataFrames (blocks, calls, compactions)",
    "config": "the effective configuration: every setting, its value and default",
    "sessions": "the sessions of this kernel",
    "last": "the result of the session's last %%agent cell",
}
_POLICY = CompactPolicy()
_CACHE = CacheSettings()


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


def parse_compact_line(line: str) -> tuple[str, str | None]:
    """`%compact` arguments -> (session name, focus). Accepts `focus=...` (quoted or not), a
    bare focus text, and `-s/--session NAME`; quotes group words, nothing else is interpreted."""
    try:
        tokens = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"%compact: {exc} (close the quote around the focus text)") from None
    session = DEFAULT_SESSION
    rest: list[str] = []
    while tokens:
        token = tokens.pop(0)
        if token in ("-s", "--session"):
            if not tokens:
                raise UsageError("%compact: --session needs a name, e.g. %compact -s lab")
            session = tokens.pop(0)
        elif token.startswith("--session="):
            session = token.split("=", 1)[1]
        elif token.startswith("-") and not rest:
            raise UsageError(
                f"%compact: unknown option {token!r}. Use: %compact [-s SESSION] [focus=TEXT]"
            )
        else:
            rest.append(token)
    focus = " ".join(rest)
    if focus.startswith("focus="):
        focus = focus[len("focus=") :]
    return session, focus.strip() or None


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
    max_turns = Int(30, min=1, help="Model calls per %%agent cell at most.").tag(config=True)
    max_tokens = Int(8_192, min=1, help="max_tokens of each model call.").tag(config=True)
    workspace = Unicode(
        "", help="Directory the agent works in (new sessions). Empty: the kernel's cwd."
    ).tag(config=True)
    transcripts_root = Unicode(
        "", help="Where transcripts go (new sessions). Empty: <workspace>/.evo_magic."
    ).tag(config=True)
    system_prompt = Unicode("", help="System prompt. Empty: evo_magic's default.").tag(config=True)
    bash_timeout = Float(120.0, min=1.0, help="Seconds before a bash command is killed.").tag(
        config=True
    )
    display_mode = Enum(
        ("auto", "rich", "plain"),
        "auto",
        help="rich: HTML updated in place; plain: streamed text; auto: rich under a kernel.",
    ).tag(config=True)
    # CompactPolicy, one trait per number (see evo_magic.compact.policy for the meaning).
    context_limit = Int(
        _POLICY.context_limit, min=1, help="Full compaction above this many characters."
    ).tag(config=True)
    token_limit = Int(
        None, allow_none=True, help="Full compaction also above this many tokens (None: off)."
    ).tag(config=True)
    keep_recent = Int(
        _POLICY.keep_recent, min=0, help="Micro-compaction keeps this many recent results."
    ).tag(config=True)
    min_chars = Int(
        _POLICY.min_chars, min=0, help="Only results longer than this are micro-compacted."
    ).tag(config=True)
    placeholder = Unicode(_POLICY.placeholder, help="Text of a micro-compacted result.").tag(
        config=True
    )
    exclude_tools = List(
        Unicode(), [], help="Tools whose results micro-compaction never clears."
    ).tag(config=True)
    clear_at_least = Int(
        _POLICY.clear_at_least, min=0, help="Micro-compact only when it frees this many chars."
    ).tag(config=True)
    summary_input_limit = Int(
        _POLICY.summary_input_limit, min=1, help="Characters of conversation the summariser sees."
    ).tag(config=True)
    summary_max_tokens = Int(
        _POLICY.summary_max_tokens, min=1, help="max_tokens of the summary request."
    ).tag(config=True)
    max_recent_files = Int(
        _POLICY.max_recent_files, min=0, help="Recent files listed after a compaction."
    ).tag(config=True)
    large_output_limit = Int(
        _POLICY.large_output_limit, min=1, help="Outputs longer than this go to a file."
    ).tag(config=True)
    preview_chars = Int(
        _POLICY.preview_chars, min=0, help="Preview kept in context of such an output."
    ).tag(config=True)
    max_failures = Int(
        _POLICY.max_failures, min=1, help="Failed auto-compactions in a row before pausing."
    ).tag(config=True)
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
          reset        start the session afresh (transcript continues)
          history      the current history as a DataFrame (one row per content block)
          transcripts  the session's transcripts as DataFrames
          config       every setting, its value and default
          sessions     the sessions of this kernel
          last         the result of the session's last %%agent cell

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
        return self._run_cell(opts, task)

    @no_var_expand
    @line_magic
    def compact(self, line: str) -> None:
        """Compact the session's whole history now, keeping a focus.

            %compact
            %compact focus="the failing test and the fix we chose"
            %compact -s lab focus=keep the {braces} and $dollars literally

        The focus reaches the summariser and the new history. Text is taken literally (no
        {var} or $var expansion). A line ending in `?` is IPython's help syntax and never
        reaches %compact: end the focus with something else, or quote it
        (`%compact focus="why?"`).
        """
        name, focus = parse_compact_line(line)
        session = self._existing_session(name)
        self._configure(session, None)
        meter = self._show_meter(session)
        view = CellView(self._rich(), sys.stdout.write)
        unsubscribe = session.subscribe(view)
        try:
            event = session.compact(focus)
        finally:
            unsubscribe()
        if not event.success and event.error:
            view.show("the history is kept as it was", "notice")
        view.update()
        self._update_meter(meter)

    # -- %%agent ---------------------------------------------------------------------------

    def _run_cell(self, opts: Any, task: str) -> None:
        session = self._session(opts.session)
        self._configure(session, opts)
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
            view.show(self._kept_message(session, "interrupted"))
            raise AgentInterrupted(self._kept_message(session, "stopped")) from None
        except ModelError as exc:
            cell.error = str(exc)
            raise AgentCellError(f"{exc}. {self._kept_message(session, 'kept')}") from None
        finally:
            unsubscribe()
            unsubscribe_events()
            view.finish(finished)
            self._store(cell, opts.out)
            self._update_meter(meter)

    @staticmethod
    def _kept_message(session: Any, what: str) -> str:
        return (
            f"{what}; the history is kept ({len(session.messages)} messages) and the next "
            "cell continues the conversation"
        )

    def _store(self, cell: CellResult, out: str | None) -> None:
        self.results[cell.session] = cell
        self.shell.user_ns["_agent"] = cell
        if out:
            if not out.isidentifier():
                raise UsageError(f"%%agent: --out needs a variable name, got {out!r}")
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
        if name == "sessions":
            return self._sessions_table()
        if name == "config":
            return ConfigTable(self)
        session = self._existing_session(opts.session)
        if name == "context":
            return self._context(session)
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
        if opts.session not in self.results:
            raise UsageError(f"%agent last: session {opts.session!r} has not run a cell yet")
        return self.results[opts.session]

    def _context(self, session: Any) -> None:
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
            self._cost_line(session),
            f"transcript: {session.transcript.path}",
        ]
        if state.last_summary:
            lines.append(f"last summary: {state.last_summary[:300]}")
        print("\n".join(lines))
        self._show_meter(session)

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
            from evo_magic.session import Session

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
        """The CompactPolicy the current settings describe."""
        try:
            return CompactPolicy(
                context_limit=self.context_limit,
                token_limit=self.token_limit,
                keep_recent=self.keep_recent,
                min_chars=self.min_chars,
                placeholder=self.placeholder,
                exclude_tools=frozenset(self.exclude_tools),
                clear_at_least=self.clear_at_least,
                summary_input_limit=self.summary_input_limit,
                summary_max_tokens=self.summary_max_tokens,
                max_recent_files=self.max_recent_files,
                large_output_limit=self.large_output_limit,
                preview_chars=self.preview_chars,
                max_failures=self.max_failures,
            )
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
        session.cache = self._cache()
        session.prices = self._prices()
        session.max_tokens = self.max_tokens
        session.bash_timeout = self.bash_timeout
        cell_turns = opts.max_turns if opts is not None else None
        session.max_turns = cell_turns or self.max_turns
        if self.system_prompt:
            session.system = self.system_prompt
        spec = self._model_spec(opts)
        wanted = spec or default_model_name()
        if session.model.name != wanted:
            session.model = resolve_model(wanted)

    def _rich(self) -> bool:
        if self.display_mode != "auto":
            return self.display_mode == "rich"
        return getattr(self.shell, "kernel", None) is not None

    def _show_meter(self, session: Any) -> tuple[Any, Any] | None:
        """Display the session's live meter (rich mode); returns (meter, display handle)."""
        if not self._rich():
            return None
        from IPython.display import display

        meter = self._meter(session)
        meter.refresh()
        return meter, display(meter, display_id=True)

    def _meter(self, session: Any) -> Any:
        from evo_magic.notebook.widget import ContextMeter

        meter = self._meters.get(session.session_id)
        if meter is None:
            meter = self._meters[session.session_id] = ContextMeter(session)
        return meter

    @staticmethod
    def _update_meter(shown: tuple[Any, Any] | None) -> None:
        """Re-render a displayed meter so its static HTML (what an exported notebook shows)
        holds the final state; the live widget view updates by itself."""
        if shown is not None:
            meter, handle = shown
            meter.refresh()
            handle.update(meter)


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
