"""Who hears a session's events: the transcript first (what is recorded is on disk before
anyone reacts), then every observer in the order they subscribed. An observer that raises does
not stop the others; its failure is raised afterwards, once, naming it."""

from __future__ import annotations

from collections.abc import Callable

from evo_magic.events import Event

Observer = Callable[[Event], None]
Record = Callable[[str, dict, object], None]
"""Writes one record: its kind, its fields, and its raw part (`Event.record_parts`)."""


class ObserverError(RuntimeError):
    """An observer raised while handling an event. The history is kept (and valid); the
    message names the observer and its error."""


class Observers:
    """The observers of one session, and the record each event leaves (see the module)."""

    def __init__(self, record: Record):
        self._record = record
        self._observers: list[Observer] = []

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event; returns a function that unsubscribes."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def __contains__(self, observer: object) -> bool:
        """Whether `observer` is subscribed."""
        return observer in self._observers

    def emit(self, event: Event) -> None:
        """Record the event (when it is one to record), then pass it to every observer; the
        first failure is raised afterwards as ObserverError (a failed write as it came)."""
        if event.recorded:
            record, raw = event.record_parts()
            self._record(record.pop("kind"), record, raw)
        failure: tuple[Observer, Exception] | None = None
        for observer in list(self._observers):
            try:
                observer(event)
            except Exception as exc:
                failure = failure or (observer, exc)
        if failure is not None:
            observer, exc = failure
            raise ObserverError(
                f"the observer {_name(observer)} failed on a {event.kind} event "
                f"({type(exc).__name__}: {exc}); the history is kept and the next ask continues"
            ) from exc


def _name(observer: Observer) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__name__
