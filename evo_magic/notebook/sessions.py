"""The kernel's sessions, by name: made from the settings, kept configured, and the meter
bookkeeping each one needs (its MeterLog, its live meter widget, its last cell's result).

The notebook's counterpart of IPython's configured HistoryManager: the magics parse and ask this
registry; it holds no setting of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from evo_magic.events import Event
from evo_magic.models import default_model_name
from evo_magic.notebook.config import AgentConfig, workspace_problem

if TYPE_CHECKING:  # the core loads with the first session, not with %load_ext
    from evo_magic.session import Session

DEFAULT_SESSION = "default"


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


class Sessions:
    """The sessions of this kernel by name, configured from `config`."""

    def __init__(self, config: AgentConfig):
        self.config = config
        self.sessions: dict[str, Session] = {}
        self.results: dict[str, CellResult] = {}
        self._meters: dict[str, Any] = {}

    def get(self, name: str, model: str | None = None) -> Session:
        """The session `name`, made from the settings (and running `model`) when it is new."""
        if name not in self.sessions:
            config = self.config
            problem = workspace_problem(config.workspace)  # checked when set; it can go away
            if problem:
                raise UsageError(
                    f"AgentMagics.workspace {problem}; set it with "
                    "%config AgentMagics.workspace = '/path'"
                )
            workspace = os.path.expanduser(config.workspace or os.getcwd())
            from evo_magic.session import Session

            self.sessions[name] = Session(
                workspace,
                model=model or config.model_spec(),
                strategies=config.configured_strategies(),
                transcripts_root=config.transcripts_root or None,
                settings=self._settings(),
            )
        return self.sessions[name]

    def existing(self, name: str) -> Session:
        """The session `name`; UsageError (naming the others) when there is none."""
        if name not in self.sessions:
            known = ", ".join(self.sessions) or "none yet"
            raise UsageError(
                f"no session {name!r} (sessions: {known}); run a %%agent cell first"
                + (f" or use -s {next(iter(self.sessions))}" if self.sessions else "")
            )
        return self.sessions[name]

    def name_of(self, session: Session) -> str | None:
        return next((n for n, s in self.sessions.items() if s is session), None)

    def _settings(self, **changes: Any) -> Any:
        try:
            return self.config.session_settings(**changes)
        except (TypeError, ValueError) as exc:  # settings made before these rules held
            raise UsageError(f"AgentMagics settings: {exc}") from None

    def configure(
        self, session: Session, max_turns: int | None = None, model: str | None = None
    ) -> None:
        """Apply the settings (and a cell's own turns) from the next call on; switch to
        `model` when one is given (a cell's, or the setting's after it changed; a %compact
        keeps the model the last cell ran)."""
        changes = {"max_turns": max_turns} if max_turns else {}
        parts: dict[str, Any] = {"strategies": self.config.configured_strategies()}
        if model is not None and session.model.name != model:
            parts["model"] = model
        session.configure(self._settings(**changes), **parts)

    def configure_all(self, model_changed: bool = False) -> None:
        """Apply changed settings to every session now (what `%agent strategies` and
        `%agent config` show is what the next call runs)."""
        model = self.model() if model_changed else None
        for session in self.sessions.values():
            self.configure(session, model=model)

    def model(self, cell_model: str | None = None, cell_offline: bool = False) -> str:
        """The model a cell runs: its options', else the settings', else the default."""
        return self.config.model_spec(cell_model, cell_offline) or default_model_name()

    def store(self, cell: CellResult) -> None:
        self.results[cell.session] = cell

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()

    # -- meters -----------------------------------------------------------------------------

    def meter_log(self, session: Session) -> Any:
        """The session's MeterLog (every meter of the session reads it; kept by the session
        from its start)."""
        return session.context_log

    def live_meter(self, session: Session) -> Any:
        """The session's live meter (one widget per session, however often it is shown)."""
        from evo_magic.notebook.widget import ContextMeter

        meter = self._meters.get(session.session_id)
        if meter is None:
            log = self.meter_log(session)
            meter = self._meters[session.session_id] = ContextMeter(session, log=log)
        return meter

    def show_cell_meter(self, session: Session) -> tuple[Any, Any]:
        """Display a meter of the cell about to run: a live widget until `finish_cell_meter`
        replaces it with the cell's final static snapshot."""
        from IPython.display import display

        from evo_magic.notebook.widget import ContextMeter

        meter = ContextMeter(session, log=self.meter_log(session), scope="cell")
        return meter, display(meter, display_id=True)

    @staticmethod
    def finish_cell_meter(shown: tuple[Any, Any] | None) -> None:
        """Replace a cell's live meter with its final static snapshot (HTML and text, no
        widget view) and close the widget: a widget view needs its kernel, so a notebook
        reopened without one would show "model not found" instead of the meter."""
        if shown is not None:
            meter, handle = shown
            handle.update(meter.finish(), raw=True)
            meter.close()
