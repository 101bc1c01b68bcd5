"""evo_magic's own transcripts (`<root>/<session_id>/session.jsonl`), schema versions 1 and 2.

Everything is SQL over one parse of each record (`from_json` into the fields below):

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

import json
from typing import Any

import numpy as np
import pyarrow as pa

from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.frames import CALL_COLUMNS, COMPACTION_COLUMNS, EVENT_COLUMNS
from evo_magic.analysis.loader import Engine, Part, SourceFile, conform

SOURCE = "evo_magic"
READS_VERSION = 2
"""The newest schema version this loader reads; a newer record is refused."""

_SIZE = {"messages": "BIGINT", "chars": "BIGINT", "tokens": "BIGINT", "tokens_exact": "BOOLEAN"}
_USAGE = {
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "cache_creation_input_tokens": "BIGINT",
    "cache_read_input_tokens": "BIGINT",
    "cache_creation": {
        "ephemeral_5m_input_tokens": "BIGINT",
        "ephemeral_1h_input_tokens": "BIGINT",
    },
}
NARROW = {
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
    "message": {"role": "VARCHAR", "content": [{"type": "VARCHAR"}]},
    "cleared_ids": ["VARCHAR"],
    "edits": [{"index": "BIGINT", "block_index": "BIGINT"}],
}
"""The fields read from every record (one parse each); calls and compactions read theirs from
their own records only."""
CALL = {
    "call": "BIGINT",
    "model": "VARCHAR",
    "stop_reason": "VARCHAR",
    "usage": _USAGE,
    "duration": "DOUBLE",
    "cost_usd": "DOUBLE",
    "context_before_micro": _SIZE,
    "context_sent": _SIZE,
}
COMPACTION = {
    "layer": "VARCHAR",
    "trigger": "VARCHAR",
    "focus": "VARCHAR",
    "error": "VARCHAR",
    "duration": "DOUBLE",
    "summary": "VARCHAR",
    "snapshot_path": "VARCHAR",
    "summary_cost_usd": "DOUBLE",
    "before": _SIZE,
    "after": _SIZE,
    "summary_usage": _USAGE,
}

_IDENTITY = """
    'evo_magic' as source, session_id, null::VARCHAR as agent_id, false as sidechain, seq,
    try_cast(ts as TIMESTAMPTZ) as timestamp, turn, epoch, segment"""


def read(engine: Engine, files: list[SourceFile]) -> Part:
    """The frames' rows of evo_magic transcripts."""
    part = Part()
    defaults = pa.table(
        {
            "file_id": pa.array([f.file_id for f in files], pa.int32()),
            "default_id": [f.path.parent.name for f in files],
            "file": [f.name for f in files],
        }
    )
    columns = f"unnest(from_json(text, '{json.dumps(NARROW)}'))"
    records = engine.query(engine.readable([f.file_id for f in files], columns))
    engine.con.register("evo", _placed(records, defaults))
    _check_versions(engine)
    part.records = engine.query("select count(*) as n from evo").column("n")[0].as_py()
    units, originals, compacted = _units(engine)
    blocks, parts = engine.blocks(units, compacted, originals)
    part.blocks.append(blocks)
    part.parts.append(parts)
    part.calls.append(conform(engine.query(_own("model_response", CALL, _CALLS)), CALL_COLUMNS))
    compactions = _own("compaction", COMPACTION, _COMPACTIONS)
    part.compactions.append(conform(engine.query(compactions), COMPACTION_COLUMNS))
    part.identities.append(
        conform(engine.query(f"select {_IDENTITY}, kind, file, line from evo"), EVENT_COLUMNS)
    )
    engine.con.unregister("evo")
    return part


def _placed(records: pa.Table, defaults: pa.Table) -> pa.Table:
    """`records` with their place: `segment` (resets so far), `turn` (the record's, else asks
    so far), `epoch` (for messages the record's, else successful compactions before it in its
    segment), the file's name, and the session id (else the directory's name)."""
    kinds = records.column("kind").to_numpy(zero_copy_only=False)
    success = records.column("success").to_numpy(zero_copy_only=False)
    files = records.column("file_id").to_numpy()
    starts = np.flatnonzero(np.diff(files, prepend=-1))  # where each file's records begin

    def running(flags: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Inclusive count of `flags` within consecutive runs of equal `groups`."""
        total = np.cumsum(flags)
        begin = np.flatnonzero(np.diff(groups, prepend=np.nan) != 0)
        offset = np.repeat(total[begin] - flags[begin], np.diff(np.append(begin, len(flags))))
        return total - offset

    del starts
    segment = running((kinds == "reset").astype(np.int64), files)
    asks = running((kinds == "ask_started").astype(np.int64), files)
    compacted = ((kinds == "compaction") & (success == True)).astype(np.int64)  # noqa: E712
    group = files.astype(np.int64) * (1 << 32) + segment
    done = running(compacted, group) - compacted
    own_epoch = records.column("epoch").to_numpy(zero_copy_only=False)
    own_turn = records.column("turn").to_numpy(zero_copy_only=False)
    placed_kind = np.isin(kinds, ["message", "tool_result", "micro_compaction"])
    epoch = np.where(
        placed_kind & ~_missing(own_epoch), np.nan_to_num(own_epoch.astype(float)), done
    )
    turn = np.where(~_missing(own_turn), np.nan_to_num(own_turn.astype(float)), asks)
    table = records.drop_columns(["epoch", "turn"])
    table = table.append_column("segment", pa.array(segment, pa.int64()))
    table = table.append_column("epoch", pa.array(epoch.astype(np.int64), pa.int64()))
    table = table.append_column("turn", pa.array(turn.astype(np.int64), pa.int64()))
    ids = dict(
        zip(
            defaults.column("file_id").to_pylist(),
            defaults.column("default_id").to_pylist(),
            strict=True,
        )
    )
    names = dict(
        zip(
            defaults.column("file_id").to_pylist(), defaults.column("file").to_pylist(), strict=True
        )
    )
    file_ids = files.tolist()
    session = records.column("session_id").to_pylist()
    table = table.set_column(
        table.column_names.index("session_id"),
        "session_id",
        pa.array([s if s is not None else ids[f] for s, f in zip(session, file_ids, strict=True)]),
    )
    return table.append_column("file", pa.array([names[f] for f in file_ids]))


def _missing(values: np.ndarray) -> np.ndarray:
    """Where an integer column fetched from Arrow is null (object None or float NaN)."""
    if values.dtype == object:
        return np.array([v is None for v in values], dtype=bool)
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.zeros(len(values), dtype=bool)


def _own(kind: str, structure: dict[str, Any], select: str) -> str:
    """`select` over the records of `kind`, with the fields of `structure` read from them."""
    return f"""with evo as (
        select mine.* exclude (o), o.* from (
            select e.*, from_json(l.text, '{json.dumps(structure)}') as o
            from (select * from evo where kind = '{kind}') e join lines l using (file_id, line)
        ) mine
    ) {select}"""


def _check_versions(engine: Engine) -> None:
    newer = engine.query(
        f"select file, line, v from evo where v > {READS_VERSION} order by file_id, line limit 1"
    ).to_pylist()
    if newer:
        row = newer[0]
        raise TranscriptError(
            f"{row['file']} line {row['line']}: record schema version {row['v']} is newer than "
            f"this evo_magic reads (version {READS_VERSION}); upgrade evo_magic to load it"
        )


def _units(engine: Engine) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The message units, the v1 tool results to keep from a message's first record, and the
    blocks micro-compaction later edited."""
    units = engine.query(
        f"""with strategies as (
            select file_id, segment, epoch + 1 as epoch, coalesce(strategy, 'summarise') as strategy
            from evo where kind = 'compaction' and success
        ),
        messages as (
            select * from evo where kind = 'message' and "index" is not null
                and message is not null
            qualify row_number() over (
                partition by file_id, segment, epoch, "index" order by line desc) = 1
        ),
        results as (
            select * from evo where kind = 'tool_result' and "index" is not null
            qualify row_number() over (
                partition by file_id, segment, epoch, "index", block_index order by line desc) = 1
        )
        select file_id, line, '$.message.content' as path, 0 as first_block, {_IDENTITY},
            "index" as message_index, message.role as role,
            case
                when message.role = 'assistant' then 'response'
                when epoch > 0 and "index" = 0
                    and coalesce(s.strategy, 'summarise') = 'summarise' then 'compact_summary'
                when list_contains(list_transform(message.content, lambda b: b.type), 'text')
                    then 'prompt'
                when list_contains(list_transform(message.content, lambda b: b.type),
                    'tool_result') then 'tool_result'
                else 'prompt'
            end as message_kind,
            false as abandoned, null::VARCHAR as status, file, 0 as ord
        from messages left join strategies s using (file_id, segment, epoch)
        union all
        select file_id, line, '$.block', coalesce(block_index, 0), {_IDENTITY},
            "index", 'user', 'tool_result', false, status, file, 0
        from results"""
    )
    first = engine.query(
        """select file_id, line, '$.message.content' as path, 0 as first_block,
            session_id, segment, epoch, "index" as message_index, 'user' as role, file
        from evo where kind = 'message' and "index" is not null
        window k as (partition by file_id, segment, epoch, "index")
        qualify count(*) over k > 1 and row_number() over (k order by line) = 1"""
    )
    compacted = engine.query(
        """select file_id, unnest(cleared_ids) as tool_use_id, null::BIGINT as segment,
            null::BIGINT as epoch, null::BIGINT as message_index, null::BIGINT as block_index
        from evo where kind = 'micro_compaction' and cleared_ids is not null
        union all
        select file_id, null, segment, epoch, e."index", e.block_index
        from (select file_id, segment, epoch, unnest(edits) as e
              from evo where kind = 'micro_compaction' and edits is not null)"""
    )
    return units, first, compacted


_CALLS = f"""select {_IDENTITY}, call,
    context_sent.messages as message_index, false as abandoned, model, stop_reason,
    false as stop_reason_inferred,
    usage.input_tokens as input_tokens, usage.output_tokens as output_tokens,
    usage.cache_creation_input_tokens as cache_creation_input_tokens,
    usage.cache_read_input_tokens as cache_read_input_tokens,
    usage.cache_creation.ephemeral_5m_input_tokens as cache_creation_5m_input_tokens,
    usage.cache_creation.ephemeral_1h_input_tokens as cache_creation_1h_input_tokens,
    cost_usd, duration,
    context_before_micro.messages as context_before_micro_messages,
    context_before_micro.chars as context_before_micro_chars,
    context_before_micro.tokens as context_before_micro_tokens,
    context_before_micro.tokens_exact as context_before_micro_tokens_exact,
    context_sent.messages as context_sent_messages, context_sent.chars as context_sent_chars,
    context_sent.tokens as context_sent_tokens,
    context_sent.tokens_exact as context_sent_tokens_exact,
    file, line
from evo where kind = 'model_response' order by file_id, line"""

_COMPACTIONS = f"""select {_IDENTITY},
    coalesce(strategy, 'summarise') as strategy,
    coalesce(layer, case trigger when 'auto' then 'over_limit'
        when 'model' then 'on_request' when 'user' then 'on_request' end) as layer,
    trigger, focus, success, error, duration,
    before.messages as before_messages, before.chars as before_chars,
    before.tokens as before_tokens, before.tokens_exact as before_tokens_exact,
    after.messages as after_messages, after.chars as after_chars,
    after.tokens as after_tokens, after.tokens_exact as after_tokens_exact,
    summary, length(summary) as summary_chars,
    summary_usage.input_tokens as summary_input_tokens,
    summary_usage.output_tokens as summary_output_tokens,
    summary_usage.cache_creation_input_tokens as summary_cache_creation_input_tokens,
    summary_usage.cache_read_input_tokens as summary_cache_read_input_tokens,
    summary_cost_usd, snapshot_path, file, line
from evo where kind = 'compaction' order by file_id, line"""
