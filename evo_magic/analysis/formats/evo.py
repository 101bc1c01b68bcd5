"""evo_magic's own transcripts (`<root>/<session_id>/session.jsonl`), schema versions 1 and 2.

One read per file (DuckDB's `read_json`) gives every field below and each message's blocks;
the rest is a few vectorised steps over those columns:

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
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.blocks import (
    block_type_sql,
    blocks_sql,
    finish,
    flatten,
    parts_table,
    replace,
)
from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
)
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
    "message": {"role": "VARCHAR", "content": "BLOCKS"},
    "block": "BLOCK",
    "cleared_ids": "VARCHAR[]",
    "edits": 'STRUCT("index" BIGINT, block_index BIGINT)[]',
    "call": "BIGINT",
    "model": "VARCHAR",
    "stop_reason": "VARCHAR",
    "usage": _USAGE,
    "duration": "DOUBLE",
    "cost_usd": "DOUBLE",
    "context_before_micro": _SIZE,
    "context_sent": _SIZE,
    "layer": "VARCHAR",
    "trigger": "VARCHAR",
    "focus": "VARCHAR",
    "error": "VARCHAR",
    "summary": "VARCHAR",
    "snapshot_path": "VARCHAR",
    "summary_cost_usd": "DOUBLE",
    "before": _SIZE,
    "after": _SIZE,
    "summary_usage": _USAGE,
}
"""The fields the frames use (other fields are only in `events`)."""


def _columns() -> dict[str, Any]:
    """`FIELDS` with the block type filled in."""
    block = block_type_sql()

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: typed(v) for k, v in value.items()}
        return {"BLOCK": block, "BLOCKS": f"{block}[]"}.get(value, value)

    return typed(FIELDS)


_SELECT = f"""* exclude (message, block, ts),
    try_cast(ts as TIMESTAMPTZ) as timestamp, message.role as role,
    {blocks_sql("coalesce(message.content, case when block is not null then [block] end)")}
        as blocks"""


def read(engine: Engine, files: list[SourceFile]) -> Part:
    """The frames' rows of evo_magic transcripts."""
    part = Part()
    columns = _columns()
    tables = []
    for source in files:
        table = engine.read(source, columns, _SELECT)
        count = table.num_rows
        table = table.append_column("file_id", pa.array(np.full(count, source.file_id, np.int64)))
        table = table.append_column("file", pa.array([source.name] * count, pa.string()))
        table = table.append_column(
            "default_id", pa.array([source.path.parent.name] * count, pa.string())
        )
        tables.append(table)
    records = _placed(pa.concat_tables(tables))
    _check_versions(records)
    part.records = records.num_rows
    blocks, parts = _blocks(records, {s.file_id: s for s in files})
    part.blocks.append(blocks)
    part.parts.append(parts)
    plain = records.drop_columns(["blocks"])
    part.calls.append(conform(engine.query(_CALLS, evo=plain), CALL_COLUMNS))
    part.compactions.append(conform(engine.query(_COMPACTIONS, evo=plain), COMPACTION_COLUMNS))
    part.identities.append(conform(_identity(plain), EVENT_COLUMNS))
    return part


def _identity(records: pa.Table) -> pa.Table:
    count = records.num_rows
    return (
        records.append_column("source", pa.array([SOURCE] * count, pa.string()))
        .append_column("agent_id", pa.nulls(count, pa.string()))
        .append_column("sidechain", pa.array(np.zeros(count, dtype=bool)))
    )


def _ints(table: pa.Table, name: str) -> np.ndarray:
    """An integer column as float64 (nulls as NaN) for vectorised work."""
    return pc.cast(table.column(name), pa.float64()).to_numpy(zero_copy_only=False)


def _placed(records: pa.Table) -> pa.Table:
    """`records` with their place: `segment` (resets so far), `turn` (the record's, else asks
    so far), `epoch` (for messages the record's, else successful compactions before it in its
    segment), and the session id (else the directory's name)."""
    kinds = pc.fill_null(records.column("kind"), "").to_numpy(zero_copy_only=False)
    success = pc.fill_null(records.column("success"), False).to_numpy(zero_copy_only=False)
    files = records.column("file_id").to_numpy()

    def running(flags: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Inclusive count of `flags` within consecutive runs of equal `groups`."""
        total = np.cumsum(flags)
        begin = np.flatnonzero(np.diff(groups, prepend=np.nan) != 0)
        lengths = np.diff(np.append(begin, len(flags)))
        return total - np.repeat(total[begin] - flags[begin], lengths)

    segment = running((kinds == "reset").astype(np.int64), files)
    asks = running((kinds == "ask_started").astype(np.int64), files)
    compacted = ((kinds == "compaction") & success).astype(np.int64)
    done = running(compacted, files * (1 << 32) + segment) - compacted
    own_epoch, own_turn = _ints(records, "epoch"), _ints(records, "turn")
    placed = np.isin(kinds, ["message", "tool_result", "micro_compaction"])
    epoch = np.where(placed & ~np.isnan(own_epoch), np.nan_to_num(own_epoch), done)
    turn = np.where(~np.isnan(own_turn), np.nan_to_num(own_turn), asks)
    session = pc.coalesce(records.column("session_id"), records.column("default_id"))
    table = records.drop_columns(["epoch", "turn", "session_id", "default_id"])
    return (
        table.append_column("session_id", session)
        .append_column("segment", pa.array(segment.astype(np.int64)))
        .append_column("epoch", pa.array(epoch.astype(np.int64)))
        .append_column("turn", pa.array(turn.astype(np.int64)))
    )


def _check_versions(records: pa.Table) -> None:
    versions = pc.fill_null(records.column("v"), 0).to_numpy(zero_copy_only=False)
    newer = np.flatnonzero(versions > READS_VERSION)
    if len(newer):
        row = records.slice(int(newer[0]), 1).to_pylist()[0]
        raise TranscriptError(
            f"{row['file']} line {row['line']}: record schema version {row['v']} is newer than "
            f"this evo_magic reads (version {READS_VERSION}); upgrade evo_magic to load it"
        )


def _duplicates(mask: np.ndarray, keys: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Among the records of `mask`, grouped by `keys`: the last of each group, the first of each
    group that has more than one, and every record of such a group (boolean masks)."""
    count = len(mask)
    last, first, repeated = (np.zeros(count, dtype=bool) for _ in range(3))
    chosen = np.flatnonzero(mask)
    if len(chosen) == 0:
        return last, first, repeated
    table = np.stack([k[chosen] for k in keys], axis=1)
    _, group = np.unique(table, axis=0, return_inverse=True)
    group = group.reshape(-1)
    groups = group.max() + 1
    ends = np.full(groups, -1, dtype=np.int64)
    np.maximum.at(ends, group, chosen)
    starts = np.full(groups, count, dtype=np.int64)
    np.minimum.at(starts, group, chosen)
    sizes = np.bincount(group, minlength=groups)
    last[ends] = True
    first[starts[sizes > 1]] = True
    repeated[chosen[sizes[group] > 1]] = True
    return last, first, repeated


def _blocks(records: pa.Table, sources: dict[int, SourceFile]) -> tuple[pa.Table, pa.Table]:
    """The blocks of the history messages (see the module's docstring) and their parts."""
    kinds = pc.fill_null(records.column("kind"), "").to_numpy(zero_copy_only=False)
    index = _ints(records, "index")
    place = [
        records.column("file_id").to_numpy().astype(float),
        records.column("segment").to_numpy().astype(float),
        records.column("epoch").to_numpy().astype(float),
        index,
    ]
    message = (
        (kinds == "message")
        & ~np.isnan(index)
        & pc.is_valid(records.column("role")).to_numpy(False)
    )
    result = (kinds == "tool_result") & ~np.isnan(index)
    keep_message, first, repeated = _duplicates(message, place)
    keep_result, _, _ = _duplicates(result, [*place, np.nan_to_num(_ints(records, "block_index"))])
    units = _units(records, keep_result)
    rows = flatten(records.column("blocks"), units, keep_message | keep_result)
    if first.any():
        again = keep_message & repeated  # the winning records of repeated messages
        rows = _keep_first_results(
            rows,
            flatten(records.column("blocks"), units, first),
            again[rows.column("record").to_numpy()],
        )
    rows = rows.drop_columns(["record"])
    rows = finish(rows, sources)
    rows = rows.append_column("compacted", _compacted(records, rows))
    parts = parts_table(rows)
    order = pc.sort_indices(
        rows,
        sort_keys=[
            ("file_id", "ascending"),
            ("segment", "ascending"),
            ("epoch", "ascending"),
            ("message_index", "ascending"),
            ("block_index", "ascending"),
            ("line", "ascending"),
        ],
    )
    if not np.array_equal(order.to_numpy(), np.arange(rows.num_rows)):
        rows = rows.take(order)
    return conform(rows, BLOCK_COLUMNS), parts


def _units(records: pa.Table, results: np.ndarray) -> pa.Table:
    """Each record's columns as a unit of the blocks frame (used for the records kept)."""
    count = records.num_rows
    lists = records.column("blocks").combine_chunks()
    texts = pc.equal(pc.list_flatten(lists).field("block_type"), "text")
    parent = pc.list_parent_indices(lists).to_numpy()
    has_text = np.bincount(parent[texts.to_numpy(zero_copy_only=False)], minlength=count) > 0
    epochs = records.column("epoch").to_numpy()
    files, segments = records.column("file_id").to_numpy(), records.column("segment").to_numpy()
    opens = (epochs > 0) & (_ints(records, "index") == 0)  # the first message of a new epoch
    strategies = _epoch_strategies(records)
    summarised = np.zeros(count, dtype=bool)
    for i in np.flatnonzero(opens).tolist():
        key = (int(files[i]), int(segments[i]), int(epochs[i]))
        summarised[i] = strategies.get(key, "summarise") == "summarise"
    roles = pc.fill_null(records.column("role"), "").to_numpy(zero_copy_only=False)
    kind = np.where(
        roles == "assistant",
        "response",
        np.where(
            summarised,
            "compact_summary",
            np.where(results, "tool_result", np.where(has_text, "prompt", "tool_result")),
        ),
    )
    role = np.where(results, "user", roles)
    first = np.where(results, np.nan_to_num(_ints(records, "block_index")), 0).astype(np.int64)
    status = pc.if_else(pa.array(results), records.column("status"), pa.nulls(count, pa.string()))
    source = pa.DictionaryArray.from_arrays(pa.array(np.zeros(count, np.int8)), [SOURCE])
    return pa.table(
        {
            "source": source.cast(pa.string()),
            "session_id": records.column("session_id"),
            "agent_id": pa.nulls(count, pa.string()),
            "sidechain": pa.array(np.zeros(count, dtype=bool)),
            "seq": records.column("seq"),
            "timestamp": records.column("timestamp"),
            "turn": records.column("turn"),
            "epoch": records.column("epoch"),
            "segment": records.column("segment"),
            "message_index": records.column("index"),
            "role": pa.array(role, pa.string()),
            "message_kind": pa.array(kind, pa.string()),
            "abandoned": pa.array(np.zeros(count, dtype=bool)),
            "status": status,
            "file_id": records.column("file_id"),
            "file": records.column("file"),
            "line": records.column("line"),
            "first_block": pa.array(first),
            "path": pa.array(np.where(results, "block", "message.content"), pa.string()),
        }
    )


def _epoch_strategies(records: pa.Table) -> dict[tuple[Any, Any, Any], str]:
    """(file, segment, epoch) -> the strategy of the compaction that opened the epoch."""
    found = {}
    rows = records.select(["kind", "success", "file_id", "segment", "epoch", "strategy"])
    for row in rows.filter(pc.equal(rows.column("kind"), "compaction")).to_pylist():
        if row["success"]:
            key = (row["file_id"], row["segment"], row["epoch"] + 1)
            found[key] = row["strategy"] or "summarise"
    return found


def _keep_first_results(rows: pa.Table, firsts: pa.Table, again: np.ndarray) -> pa.Table:
    """A v1 message recorded again (a request merged into it) may carry results that were
    micro-compacted in memory since: keep the text of its first record. `again` marks the rows
    of such messages."""
    key = ["file_id", "segment", "epoch", "message_index", "tool_use_id"]
    old = firsts.select([*key, "block_type", "text"]).to_pandas()
    old = old[old["block_type"] == "tool_result"].drop(columns="block_type")
    if old.empty:
        return rows
    where = np.flatnonzero(again)
    new = rows.select(key).take(pa.array(where)).to_pandas()
    new["row"] = where
    found = new.merge(old.drop_duplicates(key), on=key, how="inner").sort_values("row")
    if found.empty:
        return rows
    return replace(rows, "text", found["row"].to_numpy(), found["text"].tolist())


def _compacted(records: pa.Table, rows: pa.Table) -> pa.Array:
    """Whether a per-call strategy later edited each block row: v1 by `cleared_ids` (tool
    results), v2 by `edits` positions, within the same file."""
    micro = records.filter(pc.equal(records.column("kind"), "micro_compaction"))
    flags = np.zeros(rows.num_rows, dtype=bool)
    if micro.num_rows == 0:
        return pa.array(flags)
    files = rows.column("file_id").to_numpy()
    results = pc.equal(rows.column("block_type"), "tool_result").to_numpy(zero_copy_only=False)
    cleared: dict[int, list[str]] = {}
    places = []
    for row in micro.select(["file_id", "segment", "epoch", "cleared_ids", "edits"]).to_pylist():
        cleared.setdefault(row["file_id"], []).extend(row["cleared_ids"] or ())
        places += [
            (row["file_id"], row["segment"], row["epoch"], e["index"], e["block_index"])
            for e in row["edits"] or ()
        ]
    for file_id, ids in cleared.items():
        if ids:
            found = pc.is_in(rows.column("tool_use_id"), value_set=pa.array(ids, pa.string()))
            flags |= results & (files == file_id) & pc.fill_null(found, False).to_numpy(False)
    if places:
        where = ["file_id", "segment", "epoch", "message_index", "block_index"]
        frame = rows.select(where).to_pandas()
        frame["row"] = np.arange(len(frame))
        edited = pd.DataFrame(places, columns=where).drop_duplicates()
        flags[frame.merge(edited, on=where)["row"].to_numpy()] = True
    return pa.array(flags)


_IDENTITY = """'evo_magic' as source, session_id, null::VARCHAR as agent_id, false as sidechain,
    seq, timestamp, turn, epoch, segment"""

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
