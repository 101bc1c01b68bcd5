"""The context-meter widget: a live view of a session's `MeterLog`, for one cell or the whole
session, that ends as static HTML.

A cell's meter (`scope="cell"`) tells that cell's story: the context before the cell and now,
its model calls, its compactions, what the context holds; the chart shows the session's calls up
to the cell's end with the cell's own shaded. While the cell runs the widget follows the session;
`finish()` closes its scope and returns its static rendering (`text/html` and `text/plain`),
which the cell keeps: a widget view shows only while its kernel is there to serve the model, and
a finished cell's numbers never change afterwards. A session meter (`scope="session"`, what
`%agent context --live` shows) follows the session for as long as it lives.

The widget's HTML and its `snapshot()` are the same rendering of the same data, so the live and
the saved meter agree. Its growing lists (`sizes`, `calls`, `compactions`) are not sent whole at
every refresh: a refresh while an ask runs sends only the new rows, as a custom message
`{"method": "append", "sizes": [...], "calls": [...], "compactions": [...], "at": {...}}` (`at`:
how many rows each list held before), so what a refresh sends does not grow with the session.
The lists go whole when a front end asks for the state (it (re)connected), when earlier rows
changed (a new scope), at the end of each ask and after each full compaction, and when the meter
is refreshed or shown by hand: a saved notebook's widget state keeps the whole meter.

Nothing secret is in its state or HTML: sizes, names, and texts the session has redacted (and
everything passes the redactor once more on its way out).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import traitlets

from evo_magic.events import AskFinished, CompactionFinished, Event
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import MeterLog, follow
from evo_magic.meter.state import StateCache, state_of
from evo_magic.meter.tally import Tally
from evo_magic.meter.text import meter_text
from evo_magic.secrets import redact

if TYPE_CHECKING:
    from evo_magic.session import Session

REFRESH_SECONDS = 0.2
SCOPES = ("cell", "session")
ROWS = ("sizes", "calls", "compactions")
"""The synced lists that only grow while a scope lives: a live refresh appends to them."""


class ContextMeter(widgets.VBox):
    """A live meter of one session (`scope="session"`) or of one cell (`scope="cell"`, from
    now until `finish()`). Display it as often as you like; all views update.

    `log` is the session's `MeterLog` (see `follow`); without one the meter starts its own,
    which knows what happens from now on only."""

    scope = traitlets.Unicode("session").tag(sync=True)
    before = traitlets.Dict(None, allow_none=True).tag(sync=True)
    """A cell's context when it started: messages, chars, tokens."""
    messages = traitlets.Int(0).tag(sync=True)
    chars = traitlets.Int(0).tag(sync=True)
    tokens = traitlets.Int(0).tag(sync=True)
    context_limit = traitlets.Int(0).tag(sync=True)
    token_limit = traitlets.Int(None, allow_none=True).tag(sync=True)
    model_calls = traitlets.Int(0).tag(sync=True)
    """Model calls in the scope."""
    # The growing lists hold what `state_of` built and grow in place while the scope lives;
    # their rows are not checked one by one at each refresh (that made a refresh O(calls)).
    sizes = traitlets.List().tag(sync=True)
    """Characters sent per model call of the scope, in order."""
    calls = traitlets.List().tag(sync=True)
    """Per model call of the scope: call, turn, before/sent chars, tokens, cost."""
    compactions = traitlets.List().tag(sync=True)
    """Every compaction of the scope: label, strategy, layer, trigger, focus, before/after
    messages, chars and tokens, success, error, cost."""
    composition = traitlets.List(traitlets.Dict()).tag(sync=True)
    """What the context holds now, by kind: chars and (estimated) tokens."""
    cost_usd = traitlets.Float(None, allow_none=True).tag(sync=True)
    """The scope's model calls and summaries, in USD (None: one had no price)."""

    def __init__(
        self,
        session: Session,
        *,
        log: MeterLog | None = None,
        scope: str = "session",
        **kwargs: Any,
    ):
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
        self._view = widgets.HTML()
        super().__init__([self._view], **kwargs)
        self.session = session
        self._own_log = log is None
        self.meter_log = log if log is not None else follow(session)
        log = self.meter_log
        self.span = log.mark("cell", session.context()) if scope == "cell" else log.whole()
        # What earlier refreshes built (sums, states, columns, marks): a refresh builds the
        # new ones only.
        self._tally, self._states, self._chart = Tally(), StateCache(), ChartCache()
        self.data: MeterData = self._data()
        self._final: MeterData | None = None
        self._last_refresh = 0.0
        self._lock = threading.Lock()
        self._sent: tuple[int, dict[str, int], bool] | None = None
        """The states' restarts and the rows of each list the front end holds, and whether
        they came whole (not appended since)."""
        self._unlisten = self.meter_log.listen(self.on_event)
        self.refresh()

    def on_event(self, event: Event) -> None:
        """Log listener: refresh (throttled, except full compactions and the end of an ask, so
        the last state is always shown). A micro-compaction waits its turn like a model call:
        one can come with every call, and a refresh redraws the whole meter."""
        urgent = isinstance(event, CompactionFinished | AskFinished)
        if urgent or time.monotonic() - self._last_refresh >= REFRESH_SECONDS:
            self.refresh(whole=urgent)

    def refresh(self, whole: bool = True) -> None:
        """Re-read the session's size, limits and contents and update every view (a finished
        cell's meter shows its final state). `whole=False` (a refresh while an ask runs) sends
        the front end only the rows new since the last refresh, unless earlier rows changed."""
        with self._lock:
            self.data = data = self._final or self._data()
            state = state_of(data, self._states)
            with self.hold_sync():
                for name, value in state.items():
                    # The lists grow in place (the states' cache's own): set again only when
                    # new (earlier rows changed), not checked row by row at every refresh.
                    if name not in ROWS or getattr(self, name) is not value:
                        setattr(self, name, value)
                self._view.value = redact(meter_html(data, self._chart))
            self._send_rows(state, whole)
            self._last_refresh = time.monotonic()

    def _send_rows(self, state: dict[str, Any], whole: bool) -> None:
        """Send the front end the rows it has not got: appended to what it holds when it
        holds the earlier rows and `whole` is False, else the lists whole (also when rows
        were appended since the last whole lists: a saved notebook keeps state, not the
        custom messages)."""
        held = (self._states.restarts, {name: len(state[name]) for name in ROWS})
        sent = self._sent
        if sent is not None and sent[:2] == held and (sent[2] or not whole):
            return
        if whole or sent is None or sent[0] != held[0]:
            self.send_state(key=list(ROWS))
            self._sent = (*held, True)
        else:
            at = sent[1]
            rows = {name: state[name][at[name] :] for name in ROWS}
            self.send({"method": "append", **rows, "at": at})
            self._sent = (*held, False)

    def _should_send_property(self, key: str, value: Any) -> bool:
        # The growing lists leave only through `_send_rows` (new rows, or the lists whole) and
        # whole in the state a front end asks for, never as a change of the trait.
        if key in ROWS:
            return False
        return super()._should_send_property(key, value)

    def _data(self) -> MeterData:
        return MeterData.of_session(self.session, self.meter_log, self.span, self._tally)

    def finish(self) -> dict[str, str]:
        """End the scope here (a cell's meter: later events are not its own), stop following
        the session, and return the final static rendering (see `snapshot`)."""
        if self._final is None:
            self.span.close(self.meter_log)
            self._final = self._data()
            self._stop()
        return self.snapshot()

    def snapshot(self) -> dict[str, str]:
        """The meter as it is now, as static output: `text/html` and `text/plain`, no widget
        view. A finished cell keeps this, so a saved notebook shows its meter without a kernel
        (JupyterLab, Notebook, VS Code, nbconvert) instead of "model not found"."""
        self.refresh()
        return {"text/html": self._view.value, "text/plain": redact(meter_text(self.data))}

    def _stop(self) -> None:
        self._unlisten()
        if self._own_log:
            self.meter_log.stop()

    def close(self) -> None:
        if hasattr(self, "_unlisten"):
            self._stop()
        self._view.close()
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.refresh()
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        bundle["text/html"] = self._view.value
        bundle["text/plain"] = redact(meter_text(self.data))
        return bundle


def static_meter(session: Session, log: MeterLog) -> dict[str, str]:
    """The whole session's meter as static output (`text/html`, `text/plain`), no widget:
    what `%agent context` shows."""
    data = MeterData.of_session(session, log)
    return {"text/html": redact(meter_html(data)), "text/plain": redact(meter_text(data))}
