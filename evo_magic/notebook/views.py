"""What `%agent` subcommands show: the context numbers (and the context figure saved), the
sessions, the strategies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from evo_magic.notebook.sessions import Sessions
from evo_magic.render import cell_cost, clip, plural, size, usd
from evo_magic.tools import describe_sandbox


def context_text(sessions: Sessions, session: Any) -> str:
    """The session's numbers: model, context, compactions, sandbox, cost, transcript."""
    state = session.state
    paused = session.paused
    thrashing = session.state.thrashing(session.policy)
    tokens = session.token_limit
    limit = f"limit {session.policy.context_limit:,} chars" + (
        f", {tokens:,} tokens" if tokens else ""
    )
    lines = [
        f"session {session.session_id} · model {session.model.name}"
        + (" (offline scripted stand-in)" if session.model.offline else ""),
        f"context: {size(session.context())} ({limit})",
        f"compactions: {state.compact_count}; has_compacted={state.has_compacted}; "
        f"failures in a row: {state.consecutive_failures}"
        + (" — automatic compaction PAUSED" if paused else "")
        + (" (the context kept refilling: max_refills)" if thrashing else ""),
        f"recent files: {', '.join(state.recent_files) or 'none'}",
        describe_sandbox(session.settings.sandbox),
        cost_line(sessions, session),
        f"transcript: {session.transcript_path}",
    ]
    if state.last_summary:
        lines.append(f"last summary: {clip(state.last_summary, 300, one_line=False)}")
    return "\n".join(lines)


def cost_line(sessions: Sessions, session: Any) -> str:
    """Cost so far, the last cell's, and the cache hit rate of the session's calls."""
    name = sessions.name_of(session)
    last = sessions.results.get(name) if name is not None else None
    finished = [e for e in last.events if e.kind == "ask_finished"] if last else []
    cell = usd(cell_cost(finished[-1])) if finished else "-"
    cache = session.settings.cache
    caching = f"caching {cache.ttl}" if cache.enabled else "caching off"
    return (
        f"cost: {usd(session.cost_usd)} so far, {cell} last cell; cache hit rate "
        f"{session.usage.cache_hit_rate:.0%} ({caching}; prices of {session.prices.as_of})"
    )


def save_figure(session: Any, path: str) -> Path:
    """`%agent context --save PATH`: the session's context figure written to PATH (.svg,
    .png or .pdf); UsageError for another suffix, a file that cannot be written or matplotlib
    missing (saying how to install it)."""
    from evo_magic.extras import MissingExtra
    from evo_magic.meter.figure import save  # the figure's modules load when one is saved

    try:
        saved = save(session.context_figure(), path)
    except (ValueError, OSError, MissingExtra) as exc:
        raise UsageError(f"%agent context --save: {exc}") from None
    print(f"context figure saved to {saved}")
    return saved


def sessions_text(sessions: Sessions) -> str:
    if not sessions.sessions:
        return "no sessions yet: run a %%agent cell"
    return "\n".join(
        f"{name}: {session.session_id}, {size(session.context())}, "
        f"{plural(session.state.compact_count, 'compaction')}, model {session.model.name}"
        for name, session in sessions.sessions.items()
    )


class StrategiesTable:
    """The registered strategies with each parameter's default, rule and help (read from the
    strategies' declarations), and the session's own as specs, as text or HTML."""

    def __init__(self, session: Any = None):
        from evo_magic.strategies.registry import describe_registered, shown

        self.registered = describe_registered()
        self.current = [shown(s) for s in session.strategies] if session is not None else []

    def __repr__(self) -> str:
        lines = ["registered strategies (use in %config AgentMagics.strategies):"]
        for info in self.registered:
            lines.append(f"  {info.name}  [{info.when}]  {info.summary}")
            for p in info.parameters:
                rule = f" ({p.rule})" if p.rule else ""
                lines.append(f"      {p.name}={p.default!r}  {p.help}{rule}")
        if self.current:
            lines.append(f"this session runs: {', '.join(self.current)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        def parameters(info: Any) -> str:
            items = "".join(
                f"<li><code>{html.escape(f'{p.name}={p.default!r}')}</code> "
                f"{html.escape(p.help)}{html.escape(f' ({p.rule})' if p.rule else '')}</li>"
                for p in info.parameters
            )
            return f"<ul>{items}</ul>" if items else ""

        rows = "".join(
            f"<tr><td><code>{html.escape(i.name)}</code></td><td>{html.escape(i.when)}</td>"
            f"<td>{html.escape(i.summary)}{parameters(i)}</td></tr>"
            for i in self.registered
        )
        current = (
            "<p>This session runs: "
            + ", ".join(f"<code>{html.escape(spec)}</code>" for spec in self.current)
            + "</p>"
            if self.current
            else ""
        )
        return (
            "<table><tr><th>name</th><th>when</th><th>what it does, and its parameters</th>"
            f"</tr>{rows}</table>{current}"
        )
