"""What a session tells about itself: its settings' effect (model, limits, strategies, prices),
its numbers (calls, usage, spending, the context now) and where it is (its id, folder and
transcript). `Session` reads through these; it changes itself only through its own methods
(`configure`, `ask`, `compact`, `pin`, ...), so nothing here writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.compact.base import Strategy
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.state import CompactState
from evo_magic.cost import Ledger, PriceTable, Spending
from evo_magic.events import ContextSize
from evo_magic.history import History
from evo_magic.loop import Totals
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import MeterLog
from evo_magic.models import Model
from evo_magic.settings import SessionSettings
from evo_magic.summariser import Summariser
from evo_magic.tools import Tool
from evo_magic.transcript import Transcript
from evo_magic.usage import Usage

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class SessionReads:
    """The reads of a `Session` (see the module docstring)."""

    _settings: SessionSettings
    _model: Model
    _summariser: Summariser | None
    _compactor: Compactor
    _ledger: Ledger
    _history: History
    _tools: list[Tool]
    _totals: Totals
    _transcript: Transcript
    context_log: MeterLog

    @property
    def model(self) -> Model:
        """The model the loop calls (`configure(model=...)` switches from the next call)."""
        return self._model

    @property
    def system(self) -> str:
        """The system prompt sent (`settings.system_prompt`, or evo_magic's default)."""
        return self._settings.system

    @property
    def policy(self) -> CompactPolicy:
        """The compaction limits (`settings.policy`)."""
        return self._settings.policy

    @property
    def token_limit(self) -> int | None:
        """The policy's token limit in tokens (a share resolved against the model's context
        window, or `policy.window_tokens`), or None when off or when the window is unknown."""
        return self._compactor.token_limit

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        """The compaction strategies running, cheapest first."""
        return self._compactor.strategies

    @property
    def prices(self) -> PriceTable:
        """The price table calls are costed with (`settings.prices` over the shipped one)."""
        return self._ledger.prices

    @property
    def summariser(self) -> Summariser:
        """How summaries are made (see `Summariser`)."""
        return self.policy.summariser(self._summariser)

    @property
    def spending(self) -> Spending:
        """USD spent so far: the agent's calls and the summaries, and how many had no price."""
        return self._ledger.spent

    @property
    def cost_usd(self) -> float | None:
        """USD spent so far by every model and summarisation call (None when one had no
        price: see `spending` for the part that had one)."""
        return self._ledger.spent.total_usd

    # -- reading -------------------------------------------------------------------------

    @property
    def history(self) -> History:
        """The history (read it; the session changes it)."""
        return self._history

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history, as Messages API dicts (a new list; treat the dicts as read-only)."""
        return self._history.messages

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools offered to the model."""
        return tuple(self._tools)

    @property
    def state(self) -> CompactState:
        """has_compacted, last_summary, recent_files, compact_count, and the back-off."""
        return self._compactor.state

    @property
    def paused(self) -> bool:
        """True when automatic compaction is paused (failures in a row, or thrashing)."""
        return self._compactor.paused

    @property
    def usage(self) -> Usage:
        """Tokens of every model call of the session (summaries not included)."""
        return self._totals.usage

    @property
    def calls(self) -> int:
        return self._totals.calls

    @property
    def asks(self) -> int:
        return self._history.turn

    @property
    def pending_request(self) -> str | None:
        """The request the model has not finished answering (carried over by a compaction)."""
        return self._history.pending_request

    @property
    def session_id(self) -> str:
        return self._transcript.session_id

    @property
    def directory(self) -> Path:
        """The session's own directory under the transcripts root."""
        return self._transcript.directory

    @property
    def transcript_path(self) -> Path:
        """The session's transcript file (`session.jsonl` in its directory)."""
        return self._transcript.path

    def context(self) -> ContextSize:
        """The size of the history now: messages, characters (the seed's measure) and tokens
        of the whole prompt (system, tools and messages; exact right after a model call)."""
        return self._history.size()

    def context_figure(self, width: float = 3.4) -> Figure:
        """The context chart of the whole session as a matplotlib Figure `width` inches wide
        (3.4: a paper's column): the prompt sent at each model call in tokens, what was removed
        just before it, the limit, and every compaction. Save it with `figure.savefig(path)`
        (in a notebook it also shows as an image once matplotlib's inline backend is on, e.g.
        after `%matplotlib inline`). Needs matplotlib (imported here, not before)."""
        from evo_magic.meter.figure import context_figure

        return context_figure(MeterData.of_session(self, self.context_log), width)

    def __repr__(self) -> str:
        size = self.context()
        return (
            f"<Session {self.session_id} model={self._model.name!r} messages={size.messages} "
            f"chars={size.chars} compactions={self.state.compact_count}>"
        )
