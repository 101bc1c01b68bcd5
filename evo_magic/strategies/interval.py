"""IntervalSummary: the Complexity Trap's hybrid of observation masking and LLM summaries.

Source: "The Complexity Trap" (Lindenbauer et al., arXiv 2508.21433): its LLM-summary agent
summarises when the history holds N = 21 turns, keeping the last M = 10 verbatim (OpenHands'
`LLMSummarizingCondenser` shape); its hybrid also masks observations to the last M turns (the
authors' configurations summarise every 21 or every 43 turns), and saved a further 7-11% over
either alone on SWE-bench Verified. Google ADK's `EventsCompactionConfig(compaction_interval,
overlap_size)` is the same schedule.

Before every call the results older than the last `keep` turns are masked (`ObservationMasking`,
whose placeholder it shares; `masking=False` leaves them whole: the paper's LLM-Summary agent);
when the history holds `every` turns (a turn: one assistant step and its results), everything
before the last `keep` is summarised into one message, which then opens the history, followed
by those turns verbatim. The summary reads the history as it stands, masked results included
(SWE-agent runs its processors on the whole history, summary first, so its summariser reads
them whole). The summariser is called once per interval, whatever the context's size: the cost
is predictable, the prompt cache is broken once per interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message
from evo_magic.compacted import compacted_message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.masking import MASKED, ObservationMasking
from evo_magic.strategies.params import formats_lines
from evo_magic.strategies.window import safe_cut


@dataclass(frozen=True)
class IntervalSummary:
    """Mask observations older than the last `keep` turns; when the history holds `every`
    turns, summarise all but the last `keep` (see the module)."""

    every: int = setting(21, "Summarise when the history holds this many turns.", minimum=2)
    keep: int = setting(
        10, "Newest turns kept verbatim by a summary, and whose results stay unmasked.", minimum=1
    )
    placeholder: str = setting(
        MASKED,
        "Text of a masked result; {lines} is its line count.",
        check=formats_lines,
        rule="{lines} its only field",
    )
    masking: bool = setting(
        True,
        "Mask results older than the last `keep` turns between summaries (the paper's hybrid); "
        "False: summaries alone (the paper's LLM-Summary).",
    )

    name = "interval-summary"
    when = "every_call"
    source = "The Complexity Trap (arXiv 2508.21433), the hybrid; Google ADK's compaction_interval"

    def __post_init__(self) -> None:
        check_fields(self, self.name)
        if self.keep >= self.every:
            raise ValueError(
                f"{self.name}: keep ({self.keep}) must be less than every ({self.every})"
            )

    def compact(self, messages: Sequence[Message], ctx: Context) -> Sequence[Message] | None:
        masked = None
        if self.masking:
            masker = ObservationMasking(keep_turns=self.keep, placeholder=self.placeholder)
            masked = masker.compact(messages, ctx)
        view = masked if masked is not None else messages
        steps = [i for i, message in enumerate(view) if message.get("role") == "assistant"]
        if len(steps) < self.every:
            return masked
        cut = safe_cut(messages, steps[-self.keep])
        if cut <= 0:
            return masked
        # The summary reads the history as it stands (what was masked before stays masked):
        # the recorded snapshot is that history, so replay finds the summary it made. The
        # tail is the last `keep` turns, which masking leaves whole.
        summary = ctx.summarise(messages[:cut], ctx.focus)
        head = compacted_message(summary, ctx.focus, ctx.recent_files, ctx.pending_request)
        return ctx.with_pins([head, *messages[cut:]])
