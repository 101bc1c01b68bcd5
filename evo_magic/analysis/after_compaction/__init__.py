"""`after_compaction`: what agents did after each recorded compaction (repeated reads and
commands, tokens taken in again, calls to resume, refill), against the same session before it.
The measures are defined in measure.py and in the documentation (docs/after-compaction.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from evo_magic.analysis.after_compaction.results import FRAMES, AfterCompaction, frame
from evo_magic.analysis.after_compaction.walk import walked
from evo_magic.analysis.engine import Engine, engine_of
from evo_magic.analysis.sources import is_lake, session_units, transcripts_of, unit_session

__all__ = ["AfterCompaction", "after_compaction"]


def after_compaction(
    source: Any, *, engine: Engine | str | None = None, **options: Any
) -> AfterCompaction:
    """The behaviour of the agents of `source` after each recorded compaction.

    `source` is anything `load_transcripts` reads (a path, a glob), loaded Transcripts, a
    lake's Transcripts or a Session. Every conversation is measured on its own (a subagent's
    compaction in the subagent). Sessions without a compaction give no `compactions` rows and
    are still counted in the baseline (`stretches`, `summary()`).

    `engine` and its options (`workers`, `client`, `out`, `progress`; explained on `Engine`)
    measure the sessions one by one on the engine, with the same numbers as without one (a
    session that fails is a row of `failures`). A lake without an engine is measured at once,
    reading only the columns of its tool calls.
    """
    t = transcripts_of(source)
    if is_lake(t) and engine is None and not options:
        # A lake at once: DuckDB reads only the tool calls' columns of every session.
        return AfterCompaction(**measured(LakeFrames.of(t)), failures=frame([], FAILURES))
    chosen = engine_of(engine, options, apart=is_lake(source))
    if chosen is None:
        frames, failures = measured(t), frame([], FAILURES)
    else:
        swept = chosen.map(
            session_units(t), functools.partial(_measure_unit), settings="after_compaction v1"
        )
        frames = {
            name: swept.frames[name].astype(columns) if name in swept.frames else frame([], columns)
            for name, columns in FRAMES.items()
        }
        failures = swept.failures
    return AfterCompaction(**frames, failures=failures)


FAILURES = {"session_id": "string", "error": "string"}
TOOL_BLOCKS = (
    "select source, session_id, agent_id, segment, epoch, message_index, block_index, abandoned,"
    " block_type, tool_name, tool_use_id, case when block_type = 'tool_use' then text end as text,"
    " is_error, chars from blocks where block_type in ('tool_use', 'tool_result')"
)


@dataclass
class LakeFrames:
    """What the measures read of a lake: its calls and compactions, and only the tool blocks
    (the columns the measures use)."""

    calls: Any
    compactions: Any
    blocks: Any

    @classmethod
    def of(cls, lake: Any) -> LakeFrames:
        blocks = lake.sql(TOOL_BLOCKS)
        order = ["source", "session_id", "agent_id", "segment", "epoch", "message_index"]
        blocks = blocks.sort_values([*order, "block_index"], kind="stable", na_position="first")
        return cls(lake.calls, lake.compactions, blocks)


def measured(t: Any) -> dict[str, Any]:
    """The three frames of `t` (its sessions measured together in this process)."""
    rows = walked(t)
    return {name: frame(getattr(rows, name), columns) for name, columns in FRAMES.items()}


def _measure_unit(payload: Any) -> dict[str, Any]:
    """One session's frames: the unit of work of a sweep."""
    return measured(unit_session(payload))
