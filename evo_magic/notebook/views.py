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
    .png or .pdf); UsageError for another suffix or a file that cannot be written."""
    from evo_magic.meter.figure import save  # the figure's modules load when one is saved

    try:
        saved = save(session.context_figure(), path)
    except (ValueError, OSError) as exc:
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
    """The registered strategies (and the session's own), as text or HTML."""

    def __init__(self, session: Any = None):
        from evo_magic.strategies.registry import describe, describe_registered

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
