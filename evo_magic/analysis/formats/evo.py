"""evo_magic's own transcripts (`<root>/<session_id>/session.jsonl`), schema versions 1 and 2.

One `read_json` over all the files gives every field below and each message's blocks; the rest
is SQL over those columns:

- `segment` counts `reset` records; `epoch` is the record's own, else the successful
  compactions before it in its segment; `turn` the record's own, else the asks so far.
- A history message is the last `message` record of its (segment, epoch, index) (v1 records a
  message again when a request merges into it; the tool results then keep the text of the first
  record, from before micro-compaction). In v2 a tool-results message has no `message` record:
  it is assembled from its `tool_result` records, one block each at `block_index`.
- `micro_compaction` marks blocks `compacted`: v1 by `cleared_ids`, v2 by `edits` positions.
- `model_response` records are the calls, `compaction` records the compactions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.blocks import BLOCK, block_frames, blocks_sql, text_sql
from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.formats import USAGE as USAGE_FIELDS
from evo_magic.analysis.formats import Part, is_evo_magic
from evo_magic.analysis.formats.registry import Format
from evo_magic.analysis.frames import (
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    SIZE,
    USAGE,
    select_sql,
)
from evo_magic.analysis.loader import Engine, SourceFile
from evo_magic.compacted import REMINDER_PREFIX

SOURCE = "evo_magic"
READS_VERSION = 2
"""The newest schema version this loader reads; a newer record is refused."""

_SIZE = {name: {"boolean": "BOOLEAN"}.get(dtype, "BIGINT") for name, dtype in SIZE.items()}
FIELDS = {
    "v": "BIGINT",
    "session_id": "VARCHAR",
    "seq": "BIGINT",
    "ts": "VARCHAR",
    "kind": "VARCHAR",
    "turn": "BIGINT",
    "epoch": "BIGINT",
    "index": "BIGINT",
    "block_index": "BIGINT",
    "status": "VARCHAR",
    "success": "BOOLEAN",
    "strategy": "VARCHAR",
    "message": {"role": "VARCHAR", "content": [BLOCK]},
    "block": BLOCK,
    "cleared_ids": ["VARCHAR"],
    "edits": [
        {
            "index": "BIGINT",
            "block_index": "BIGINT",
            "block": {"type": "VARCHAR", "text": "VARCHAR"},
        }
    ],
    "call": "BIGINT",
    "model": "VARCHAR",
    "stop_reason": "VARCHAR",
    "usage": USAGE_FIELDS,
    "duration": "DOUBLE",
    "cost_usd": "DOUBLE",
    "context_before_micro": _SIZE,
    "context_sent": _SIZE,
    "layer": "VARCHAR",
    "trigger": "VARCHAR",
    "focus": "VARCHAR",
    "error": "VARCHAR",
    "summary": "VARCHAR",
    "summary_edited": "BOOLEAN",
    "summary_proposed": "VARCHAR",
    "snapshot_path": "VARCHAR",
    "summary_cost_usd": "DOUBLE",
    "fallback_for": "VARCHAR",
    "before": _SIZE,
    "after": _SIZE,
    "summary_usage": USAGE_FIELDS,
    "applied_edits": "JSON",
    "cache_miss_reason": "JSON",
    "turn_note": "VARCHAR",
}
"""The fields the frames use (other fields are only in `events`)."""

_SELECT = """* exclude (message, block, ts), try_cast(ts as TIMESTAMPTZ) as timestamp,
    message.role as role,
    coalesce(message.content, case when block is not null then [block] end) as content,
    list_contains(list_transform(message.content, lambda b: b.type), 'text') as has_text"""

_UNITS = f"""with kept as (
        select file_id, kind, max(line) as line, min(line) as first_line, count(*) as copies
        from records
        where "index" is not null
            and (kind = 'tool_result' or kind = 'message' and role is not null)
        group by file_id, segment, epoch, "index", kind,
            case when kind = 'tool_result' then coalesce(block_index, 0) end
    ),
    earlier as (
        select k.file_id, k.line,
            list_transform(list_filter(f.content, lambda b: b.type = 'tool_result'),
                lambda b: {{'id': b.tool_use_id, 'text': {text_sql("b")}}}) as earlier
        from kept k join records f on f.file_id = k.file_id and f.line = k.first_line
        where k.kind = 'message' and k.copies > 1
    ),
    opened as (
        select file_id, segment, epoch + 1 as epoch,
            arg_max(coalesce(strategy, 'summarise'), line) as strategy
        from records where kind = 'compaction' and success group by all
    ),
    units as (
        select r.file_id, r.line, '{SOURCE}' as source, r.session_id, null as agent_id,
            false as sidechain, r.seq, r.timestamp, r.turn, r.epoch, r.segment,
            r."index" as message_index,
            case when r.kind = 'tool_result' then 'user' else r.role end as role,
            case when r.role = 'assistant' then 'response'
                when r.epoch > 0 and r."index" = 0 and coalesce(o.strategy, 'summarise')
                    = 'summarise' then 'compact_summary'
                when r.kind = 'tool_result' then 'tool_result'
                when r.has_text then 'prompt' else 'tool_result' end as message_kind,
            false as abandoned, case when r.kind = 'tool_result' then r.status end as status,
            null as parent_tool_use_id,
            case when r.kind = 'tool_result' then coalesce(r.block_index, 0) else 0 end
                as first_block,
            case when r.kind = 'tool_result' then 'block' else 'message.content' end as path,
            0 as branch, e.earlier
        from kept k join records r using (file_id, line)
        left join opened o on o.file_id = r.file_id and o.segment = r.segment
            and o.epoch = r.epoch
        left join earlier e on e.file_id = r.file_id and e.line = r.line
    ),
    micro as (select * from records where kind = 'micro_compaction'),
    cleared as (select distinct file_id, unnest(cleared_ids) as tool_use_id from micro),
    edited as (
        select distinct file_id, segment, epoch, e."index" as message_index, e.block_index
        from (select file_id, segment, epoch, unnest(edits) as e from micro)
    )"""

_COMPACTED = """r.block_type = 'tool_result' and exists (select 1 from cleared c
        where c.file_id = r.file_id and c.tool_use_id = r.tool_use_id)
    or exists (select 1 from edited e where e.file_id = r.file_id and e.segment = r.segment
        and e.epoch = r.epoch and e.message_index = r.message_index
        and e.block_index = r.block_index)"""

_IDENTITY = {"source": f"'{SOURCE}'", "agent_id": "null", "sidechain": "false"}
_LAYER = """coalesce(layer, case trigger when 'auto' then 'over_limit'
    when 'model' then 'on_request' when 'user' then 'on_request' end)"""
_CALL_SELECT = select_sql(
    CALL_COLUMNS,
    **_IDENTITY,
    message_index="context_sent.messages",
    abandoned="false",
    stop_reason_inferred="false",
    **{name: f"usage.{name}" for name in USAGE},
    cache_creation_5m_input_tokens="usage.cache_creation.ephemeral_5m_input_tokens",
    cache_creation_1h_input_tokens="usage.cache_creation.ephemeral_1h_input_tokens",
    reasoning_output_tokens="null",
    usage_partial="false",  # the live session records each reply's final usage
    **{f"context_{at}_{n}": f"context_{at}.{n}" for at in ("before_micro", "sent") for n in SIZE},
    parent_tool_use_id="null",
    applied_edits="case when json_array_length(applied_edits) > 0 then applied_edits end",
    cache_miss_reason="cache_miss_reason->>'type'",
    cache_missed_tokens="try_cast(cache_miss_reason->>'cache_missed_input_tokens' as BIGINT)",
    turn_note="case when coalesce(appended_note, turn_note) is not null "
    "then concat_ws(' ', appended_note, turn_note) end",
)
_COMPACTION_SELECT = select_sql(
    COMPACTION_COLUMNS,
    **_IDENTITY,
    # `strategy` is what was configured, `ran` what ran (they differ after a fallback).
    strategy="coalesce(fallback_for, strategy, 'summarise')",
    ran="coalesce(strategy, 'summarise')",
    layer=_LAYER,
    **{f"{at}_{name}": f"{at}.{name}" for at in ("before", "after") for name in SIZE},
    summary_chars="length(summary)",
    **{f"summary_{name}": f"summary_usage.{name}" for name in USAGE},
)
_FROM = "from records join files using (file_id)"
_NOTES = f"""with steps as (
        select file_id, line, kind, count(*) filter (where kind = 'model_response') over (
            partition by file_id order by line rows between unbounded preceding and 1 preceding
        ) as calls_before, edits
        from records where kind in ('model_response', 'micro_compaction')
    ),
    appended as (
        select file_id, calls_before, string_agg(note, ' ' order by line) as appended_note
        from (select file_id, calls_before, line, unnest(edits).block.text as note
            from steps where kind = 'micro_compaction')
        where starts_with(note, '{REMINDER_PREFIX}')
        group by all
    ),
    noted as (
        select s.file_id, s.line, a.appended_note from steps s
        join appended a using (file_id, calls_before) where s.kind = 'model_response'
    )"""
"""The notes every-call edits appended for the model (a text block starting with
`REMINDER_PREFIX`: `token-budget`'s, `handoff`'s reminder) since the previous call: the note of
the call that follows them."""
_CALLS = f"""{_NOTES} select {_CALL_SELECT} {_FROM} left join noted using (file_id, line)
    where kind = 'model_response' order by file_id, line"""
_COMPACTIONS = (
    f"select {_COMPACTION_SELECT} {_FROM} where kind = 'compaction' order by file_id, line"
)
_EVENTS = f"select {select_sql(EVENT_COLUMNS, **_IDENTITY)} {_FROM} order by file_id, line"


def _placed(records: pa.Table, sources: list[SourceFile]) -> pa.Table:
    """`records` with their place: `segment` (resets so far in the file), `turn` (the record's,
    else asks so far), `epoch` (for messages, results and edits the record's, else successful
    compactions before it in its segment), and `session_id` (else the directory's name).
    Running counts over columns already in file order: numpy, no sort."""

    def kind(name: str) -> np.ndarray:
        return pc.fill_null(pc.equal(records.column("kind"), name), False).to_numpy(False)

    def running(flags: np.ndarray, restart: np.ndarray) -> np.ndarray:
        """Inclusive running count of `flags`, from 0 again where `restart` is true."""
        total = np.cumsum(flags, dtype=np.int64)
        return total - np.maximum.accumulate(np.where(restart, total - flags, 0))

    def own(name: str, fallback: np.ndarray, where: Any = True) -> pa.Array:
        column = records.column(name).combine_chunks()
        mask = pc.and_(pc.is_valid(column), pa.array(np.broadcast_to(where, len(column))))
        return pc.if_else(mask, column, pa.array(fallback))

    files = records.column("file_id").to_numpy()
    first = np.diff(files, prepend=-1) != 0
    segment = running(kind("reset"), first)
    done = kind("compaction") & pc.fill_null(records.column("success"), False).to_numpy(False)
    epoch = running(done, first | (np.diff(segment, prepend=-1) != 0)) - done
    placed = kind("message") | kind("tool_result") | kind("micro_compaction")
    directories = {s.file_id: s.path.parent.name for s in sources}
    directory = pa.array([directories[f] for f in files.tolist()], pa.large_string())
    values = {
        "segment": pa.array(segment),
        "epoch": own("epoch", epoch, placed),
        "turn": own("turn", running(kind("ask_started"), first)),
        "session_id": pc.coalesce(records.column("session_id"), directory),
    }
    for name, value in values.items():
        if name in records.column_names:
            records = records.drop_columns([name])
        records = records.append_column(name, value)
    return records


def read(engine: Engine, sources: list[SourceFile]) -> Part:
    """The frames' rows of evo_magic transcripts."""
    records = _placed(engine.read(sources, FIELDS, _SELECT, key="kind"), sources)
    newer = engine.query(
        f"select file, line, v from records join files using (file_id) where v > {READS_VERSION}"
        " order by file_id, line limit 1",
        records=records,
    ).to_pylist()
    if newer:
        row = newer[0]
        raise TranscriptError(
            f"{row['file']} line {row['line']}: record schema version {row['v']} is newer than "
            f"this evo_magic reads (version {READS_VERSION}); upgrade evo_magic to load it"
        )
    blocks, parts = block_frames(engine, blocks_sql(_UNITS, _COMPACTED), records=records)
    return Part(
        blocks=blocks,
        parts=parts,
        calls=engine.query(_CALLS, records=records),
        compactions=engine.query(_COMPACTIONS, records=records),
        events=engine.query(_EVENTS, records=records),
        records=records.num_rows,
    )


FORMAT = Format(
    name=SOURCE,
    reads="evo_magic's own transcripts (<root>/<session>/session.jsonl), schema versions 1-2",
    recognised_by="JSON lines whose first record has the schema version `v` and a `kind`",
    detect_hook=is_evo_magic,
    read_hook=read,
)
"""The reader as registered (entry point `evo_magic` of the group `evo_magic.formats`)."""
