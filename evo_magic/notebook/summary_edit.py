"""Reading and editing a summary before it replaces the context: `%compact --edit`, `--apply`,
`--apply-file`, and `%agent summaries`.

`%compact --edit [focus=...]` asks the session for the summary `%compact` would apply
(`Session.propose_summary`: the real summariser, the very request, nothing changed). In
JupyterLab, Notebook and VS Code it shows in an editable text area with Apply and Cancel; in
terminal IPython it is printed and saved to a file, with the two ways on: `%compact --apply`
applies it as it is, `%compact --apply-file FILE` applies the file once edited. Either way the
applied text is recorded as edited, with the proposal it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from evo_magic.events import CompactionFinished
from evo_magic.meter.text import tokens_text
from evo_magic.render import compaction_line
from evo_magic.secrets import redact

if TYPE_CHECKING:
    from evo_magic.session import Session, SummaryProposal

PROPOSAL_FILE = "proposed-summary.md"
"""Where a terminal's proposal is saved, in the session's directory, to edit and apply."""
MAX_SUMMARY_BYTES = 1_000_000
"""A summary file larger than this is refused (a summary is a few thousand characters)."""
SUMMARY_COLUMNS = ("timestamp", "turn", "strategy", "trigger", "focus", "summary_edited")
UNCHANGED = "Nothing has changed yet."
NO_PROPOSAL = (
    "no proposed summary for the history as it is now: run %compact --edit [focus=...] first "
    "(a proposal is dropped when the history changes, e.g. after a %%agent cell)"
)


def propose(session: Session, focus: str | None, strategy: Any, rich: bool) -> None:
    """`%compact --edit`: show the proposed summary to edit (rich) or to apply (terminal)."""
    try:
        proposal = session.propose_summary(focus, strategy)
    except ValueError as exc:
        raise UsageError(f"%compact --edit: {exc}") from None
    if rich:
        from IPython.display import display

        editor = SummaryEditor(session, proposal)
        editor.handle = display(editor, display_id=True)
        return
    path = session.directory / PROPOSAL_FILE
    path.write_text(proposal.text + "\n", encoding="utf-8")
    print(proposal_text(proposal, path))


def proposal_head(proposal: SummaryProposal) -> str:
    """One line: which strategy, the focus, and the context before and after it applies."""
    focus = f"; focus “{proposal.focus}”" if proposal.focus else ""
    return (
        f"Proposed summary ({proposal.strategy}{focus}): {tokens_text(proposal.before)} -> "
        f"{tokens_text(proposal.after)} once applied."
    )


def proposal_text(proposal: SummaryProposal, path: Path) -> str:
    """What a terminal shows: the proposal and, below it, how to apply it or an edit of it."""
    rule = "-" * 72
    return "\n".join(
        [
            f"{proposal_head(proposal)} {UNCHANGED}",
            rule,
            proposal.text,
            rule,
            "To apply it as it is:  %compact --apply",
            f"To edit it first:      edit {path} (it holds this summary), then",
            f"                       %compact --apply-file {path}",
            "To drop it:            do nothing (it is dropped when the history changes).",
        ]
    )


@dataclass(frozen=True)
class Given:
    """What `%compact --apply` / `--apply-file` apply: the text, and the focus and strategy to
    apply it with (the proposal's, when there is one)."""

    summary: str
    focus: str | None
    strategy: Any


def given(session: Session, file: str | None, focus: str | None, strategy: Any) -> Given:
    """The summary `%compact --apply` (`file` None: the proposal as it is) or `--apply-file`
    applies. With a proposal for the history as it is, its focus and strategy are used (a
    different focus or strategy on the line is a UsageError); a file without a proposal is a
    summary written by hand, applied with the line's focus and strategy."""
    proposal = session.proposal
    if proposal is None and file is None:
        raise UsageError(f"%compact --apply: {NO_PROPOSAL}")
    text = read_summary(file) if file is not None else proposal.text  # type: ignore[union-attr]
    if proposal is None:
        return Given(text, focus, strategy)
    if (focus is not None and focus != proposal.focus) or strategy is not None:
        raise UsageError(
            "%compact --apply: the summary was proposed with its own focus and strategy "
            f"(focus {proposal.focus!r}, {proposal.strategy}); apply it without focus= or "
            "--strategy, or propose again with %compact --edit"
        )
    return Given(text, proposal.focus, proposal.chosen)


def read_summary(file: str) -> str:
    """The text of a summary file (UTF-8); UsageError saying why when it cannot be one."""
    path = Path(file).expanduser()
    if not path.is_file():
        raise UsageError(f"%compact --apply-file: {file!r} is not a file")
    if path.stat().st_size > MAX_SUMMARY_BYTES:
        raise UsageError(
            f"%compact --apply-file: {file!r} is larger than {MAX_SUMMARY_BYTES:,} bytes; "
            "a summary replaces the context and must be much smaller than it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"%compact --apply-file: {file!r} is not UTF-8 text ({exc})") from None
    if not text.strip():
        raise UsageError(f"%compact --apply-file: {file!r} is empty")
    return text


def applied_text(event: CompactionFinished) -> str:
    """One line for an applied (or refused) edited summary."""
    if not event.success:
        return f"Not applied: {event.error}. The history is kept as it was."
    return f"Applied the edited summary: {compaction_line(event)}"


class SummaryEditor:
    """The proposal in an editable text area with Apply and Cancel (ipywidgets). Apply
    compacts with the text as it is then; nothing changes before."""

    def __init__(self, session: Session, proposal: SummaryProposal):
        import ipywidgets as widgets

        self.session, self.proposal = session, proposal
        self.head = widgets.HTML(
            _html_text(f"{proposal_head(proposal)} {UNCHANGED} Edit it, then Apply.")
        )
        self.text = widgets.Textarea(
            value=proposal.text, layout=widgets.Layout(width="100%", height="16em")
        )
        self.text.add_class("evo-summary-text")
        self.apply = widgets.Button(description="Apply", button_style="primary")
        self.cancel = widgets.Button(description="Cancel")
        self.status = widgets.HTML()
        self.status.add_class("evo-summary-status")
        self.apply.on_click(lambda _: self.on_apply())
        self.cancel.on_click(lambda _: self.on_cancel())
        self.box = widgets.VBox(
            [self.head, self.text, widgets.HBox([self.apply, self.cancel]), self.status]
        )
        self.box.add_class("evo-summary-editor")
        self.handle: Any = None
        """The display to replace with a static record once applied or cancelled."""

    def on_apply(self) -> CompactionFinished | None:
        """Apply the text as it is now (when the history is still the proposal's)."""
        if self.session.proposal is not self.proposal:
            self._done(
                "Not applied: this proposal is no longer current (the history changed, or a "
                "newer one was made); propose again with %compact --edit.",
                keep_open=False,
            )
            return None
        try:
            event = self.session.compact(
                self.proposal.focus, self.proposal.chosen, summary=self.text.value
            )
        except Exception as exc:  # shown where the user clicked, not lost in a log
            self._done(f"Not applied: {type(exc).__name__}: {exc}", keep_open=True)
            return None
        self._done(applied_text(event), keep_open=not event.success)
        return event

    def on_cancel(self) -> None:
        self._done("Cancelled: nothing changed.", keep_open=False)

    def _done(self, message: str, *, keep_open: bool) -> None:
        self.status.value = _html_text(message)
        if keep_open:
            return
        for control in (self.text, self.apply, self.cancel):
            control.disabled = True
        if self.handle is not None:
            # A widget view needs its kernel: the cell keeps a static record instead, which a
            # saved notebook shows without one.
            self.handle.update(self.record(message), raw=True)
            self.box.close()

    def record(self, message: str) -> dict[str, str]:
        """The editor's end as static output: what was proposed, the text as it was last, and
        what happened."""
        import html

        head = proposal_head(self.proposal)
        return {  # redacted on the way out, as everything the session shows
            key: redact(value)
            for key, value in {
                "text/html": (
                    f"<div class='evo-summary-record'>{_html_text(head)}"
                    "<pre class='evo-summary-text' style='white-space:pre-wrap;"
                    "border:1px solid #ddd;padding:4px 6px'>"
                    f"{html.escape(self.text.value)}</pre>"
                    f"<div class='evo-summary-status'>{_html_text(message)}</div></div>"
                ),
                "text/plain": f"{head}\n{self.text.value}\n{message}",
            }.items()
        }

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.box._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        bundle["text/plain"] = proposal_head(self.proposal) + "\n" + self.proposal.text
        return bundle


def _true(value: Any) -> bool:
    """A frame's boolean cell as a bool (missing: False)."""
    try:
        return bool(value)
    except TypeError:  # pandas' NA has no truth value
        return False


def _html_text(text: str) -> str:
    import html

    return f"<span style='white-space:pre-wrap'>{html.escape(text)}</span>"


def summaries(session: Session) -> Summaries:
    """`%agent summaries`: every compaction of the session that applied a summary, from its
    transcript: when, which strategy and trigger, the focus, whether a person edited it, and
    the text (with the proposal it was edited from)."""
    from evo_magic.analysis import load_transcripts

    session.sync()
    frame = load_transcripts(session.directory).compactions
    made = frame[frame["success"].fillna(False) & (frame["summary"].fillna("") != "")]
    columns = [*SUMMARY_COLUMNS, "summary", "summary_proposed"]
    return Summaries(made[columns].rename(columns={"timestamp": "when"}).reset_index(drop=True))


@dataclass(frozen=True)
class Summaries:
    """The applied summaries: `frame` is the DataFrame; shown, each summary is whole (a
    DataFrame's view cuts long texts to fifty characters)."""

    frame: Any

    def __len__(self) -> int:
        return len(self.frame)

    def _rows(self) -> list[tuple[str, Any]]:
        return [(self._head(row), row) for row in self.frame.itertuples()]

    @staticmethod
    def _head(row: Any) -> str:
        when = row.when.strftime("%Y-%m-%d %H:%M:%S UTC") if row.when is not None else "?"
        focus = f" · focus “{row.focus}”" if isinstance(row.focus, str) else ""
        edited = " · edited" if _true(row.summary_edited) else ""
        return f"{when} · ask {row.turn} · {row.strategy} ({row.trigger}){focus}{edited}"

    def __repr__(self) -> str:
        if not len(self):
            return "no summary applied yet"
        return "\n\n".join(f"{head}\n{row.summary}" for head, row in self._rows())

    def _repr_html_(self) -> str:
        import html

        if not len(self):
            return "<p>no summary applied yet</p>"
        items = []
        for head, row in self._rows():
            proposed = row.summary_proposed
            original = (
                "<details><summary>the proposal it was edited from</summary><div "
                f"style='white-space:pre-wrap'>{html.escape(proposed)}</div></details>"
                if isinstance(proposed, str) and proposed != row.summary
                else ""
            )
            items.append(
                f"<div class='evo-applied-summary' style='margin:6px 0'><b>{html.escape(head)}"
                f"</b><div class='evo-summary-text' style='white-space:pre-wrap;border-left:3px "
                f"solid #7b1fa2;padding:2px 8px'>{html.escape(row.summary)}</div>{original}</div>"
            )
        return redact("".join(items))
