"""Experiments in the notebook: each one's table redrawn in place while it runs, and
`%agent experiment`, the list of this kernel's experiments."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evo_magic.experiments import live

if TYPE_CHECKING:
    from evo_magic.experiments.results import Experiment


def show_live(experiment: Experiment) -> Callable[[], None]:
    """Display `experiment` in the running cell now; the returned function redraws it."""
    from IPython.display import display

    handle = display(experiment, display_id=True)
    return lambda: handle.update(experiment) if handle is not None else None


def watch_in_kernel(ipython: Any) -> Callable[[], None] | None:
    """In a kernel (where a display can be redrawn), show every experiment live; returns
    what stops it (None outside a kernel: the text of a terminal cannot be redrawn)."""
    if getattr(ipython, "kernel", None) is None:
        return None
    return live.watch(show_live)


class ExperimentsTable:
    """The experiments of this kernel, oldest first: where they are stored, the model, the
    strategies, and runs done, failed and left."""

    def __init__(self) -> None:
        self.rows = [
            (str(x.out), x.model, ", ".join(x.labels), x.total, x.done, x.failed, x.left, _state(x))
            for x in live.started()
        ]

    HEADERS = ("out", "model", "strategies", "runs", "done", "failed", "left", "state")

    def __repr__(self) -> str:
        if not self.rows:
            return "No experiment has run in this kernel (evo_magic.experiment(...) starts one)."
        return "\n".join(
            f"{i}. {out}: {model}, {labels}; {done} of {total} done, {failed} failed, "
            f"{left} left ({state})"
            for i, (out, model, labels, total, done, failed, left, state) in enumerate(self.rows, 1)
        )

    def _repr_html_(self) -> str:
        if not self.rows:
            return f"<p>{html.escape(repr(self))}</p>"
        head = "".join(f"<th>{h}</th>" for h in self.HEADERS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _state(x: Experiment) -> str:
    if x.stopped:
        return f"stopped: {x.stopped}"
    return "finished" if x.finished else "running"
