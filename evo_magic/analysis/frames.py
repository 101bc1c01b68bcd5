"""The frames' columns and dtypes, and typed pandas frames built from Arrow tables or rows.

Every frame has the identity columns (`IDENTITY`); docs/transcripts.md documents each column.
They come first, except in `compactions`, which leads with what a reader compares (which
compaction, why, its size before and after) and keeps its provenance at the end. Dtypes:
"category", "Int64", "boolean", "Float64", "string", and "datetime" (datetime64[us, UTC]);
missing values are <NA> (categories included) and NaT.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

IDENTITY = {
    "source": "category",
    "session_id": "category",
    "agent_id": "category",
    "sidechain": "boolean",
    "seq": "Int64",
    "timestamp": "datetime",
    "turn": "Int64",
    "epoch": "Int64",
    "segment": "Int64",
}
"""Columns first in every frame: where a row comes from and where it sits in its session."""

_WHERE = {"file": "category", "line": "Int64"}

BLOCK_COLUMNS = {
    **IDENTITY,
    "message_index": "Int64",
    "role": "category",
    "message_kind": "category",
    "abandoned": "boolean",
    "block_index": "Int64",
    "block_type": "category",
    "tool_name": "category",
    "tool_use_id": "string",
    "is_error": "boolean",
    "status": "category",
    "text": "string",
    "chars": "Int64",
    "parts": "Int64",
    "media_type": "category",
    "compacted": "boolean",
    "parent_tool_use_id": "string",
    **_WHERE,
}
"""Columns of `Transcripts.blocks` and their dtypes."""

HISTORY_COLUMNS = {
    name: BLOCK_COLUMNS[name]
    for name in (
        "message_index",
        "role",
        "block_index",
        "block_type",
        "tool_name",
        "chars",
        "is_error",
        "text",
        "tool_use_id",
    )
}
"""Columns of `history_frame`: those of `blocks` that need no transcript, the short ones first
(the text, long, and the tool_use_id, opaque, last)."""

PART_COLUMNS = {
    **IDENTITY,
    "message_index": "Int64",
    "abandoned": "boolean",
    "block_index": "Int64",
    "tool_use_id": "string",
    "part_index": "Int64",
    "part_type": "category",
    "text": "string",
    "chars": "Int64",
    "media_type": "category",
    **_WHERE,
}
"""Columns of `Transcripts.parts`: one row per part of a tool result whose content is a list."""

USAGE = {
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cache_creation_input_tokens": "Int64",
    "cache_read_input_tokens": "Int64",
}
SIZE = {"messages": "Int64", "chars": "Int64", "tokens": "Int64", "tokens_exact": "boolean"}

CALL_COLUMNS = {
    **IDENTITY,
    "call": "Int64",
    "message_index": "Int64",
    "abandoned": "boolean",
    "model": "category",
    "stop_reason": "category",
    "stop_reason_inferred": "boolean",
    **USAGE,
    "cache_creation_5m_input_tokens": "Int64",
    "cache_creation_1h_input_tokens": "Int64",
    "reasoning_output_tokens": "Int64",
    "cost_usd": "Float64",
    "usage_partial": "boolean",
    "duration": "Float64",
    **{f"context_before_micro_{name}": dtype for name, dtype in SIZE.items()},
    **{f"context_sent_{name}": dtype for name, dtype in SIZE.items()},
    "applied_edits": "string",
    "cache_miss_reason": "category",
    "cache_missed_tokens": "Int64",
    "turn_note": "string",
    "parent_tool_use_id": "string",
    **_WHERE,
}
"""Columns of `Transcripts.calls` and their dtypes (`applied_edits`: the server's clearing
edits on the call's prompt as the API reported them, JSON; null when none; `cache_miss_reason`
and `cache_missed_tokens`: why the prompt missed the cache and the tokens it missed, as the
API diagnosed it when the session asked, `Session(cache_diagnosis=True)`; `turn_note`: the note
for the model's turn a strategy sent with the call, such as `token-budget`'s, as a
mid-conversation system message or appended to the newest message; null when none)."""

COMPACTION_COLUMNS = {
    "session_id": "category",
    "turn": "Int64",
    "strategy": "category",
    "trigger": "category",
    "focus": "string",
    "before_tokens": "Int64",
    "after_tokens": "Int64",
    "before_chars": "Int64",
    "after_chars": "Int64",
    "success": "boolean",
    "before_messages": "Int64",
    "after_messages": "Int64",
    "layer": "category",
    "ran": "category",
    "fallback_for": "category",
    "error": "string",
    "summary": "string",
    "summary_chars": "Int64",
    "summary_edited": "boolean",
    "summary_proposed": "string",
    "duration": "Float64",
    "before_tokens_exact": "boolean",
    "after_tokens_exact": "boolean",
    **{f"summary_{name}": dtype for name, dtype in USAGE.items()},
    "summary_cost_usd": "Float64",
    "snapshot_path": "string",
    **{name: dtype for name, dtype in IDENTITY.items() if name not in ("session_id", "turn")},
    **_WHERE,
}
"""Columns of `Transcripts.compactions` and their dtypes: what a reader compares first (in
pandas' default view the first ten columns show: session, turn, strategy, trigger, focus,
tokens and characters before and after), then the details, then where each row comes from."""

LEADING = {
    "blocks": ("message_index", "role", "message_kind", "block_type", "tool_name", "chars"),
    "parts": ("message_index", "tool_use_id", "part_index", "part_type", "chars"),
    "calls": ("call", "model", "stop_reason", "input_tokens", "output_tokens", "cost_usd"),
    "compactions": tuple(list(COMPACTION_COLUMNS)[2:12]),
    "events": ("kind",),
}
"""Per frame, the columns a reader looks at first (what `Transcripts` lists)."""

EVENT_COLUMNS = {**IDENTITY, "kind": "category", **_WHERE}
"""The leading columns of `Transcripts.events`; each record's own fields follow."""

FRAMES = {
    "blocks": BLOCK_COLUMNS,
    "parts": PART_COLUMNS,
    "calls": CALL_COLUMNS,
    "compactions": COMPACTION_COLUMNS,
}
"""The frames built at load time and their columns (`events` is built on first use)."""

_TYPES = {
    "category": (pa.large_string(), "VARCHAR"),
    "string": (pa.large_string(), "VARCHAR"),
    "Int64": (pa.int64(), "BIGINT"),
    "boolean": (pa.bool_(), "BOOLEAN"),
    "Float64": (pa.float64(), "DOUBLE"),
    "datetime": (pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ"),
}
_PANDAS_TYPES = {
    pa.int64(): pd.Int64Dtype(),
    pa.bool_(): pd.BooleanDtype(),
    pa.float64(): pd.Float64Dtype(),
    pa.large_string(): pd.StringDtype(),
}


def arrow_schema(spec: dict[str, str]) -> pa.Schema:
    """The Arrow schema of a frame whose columns are `spec`."""
    return pa.schema([(name, _TYPES[dtype][0]) for name, dtype in spec.items()])


def select_sql(spec: dict[str, str], **expressions: str) -> str:
    """A SQL select list giving `spec`'s columns, in order and typed: each from its SQL
    expression in `expressions`, else from the column of the same name."""
    items = []
    for name, dtype in spec.items():
        expression = expressions.get(name, f'"{name}"')
        items.append(f'cast({expression} as {_TYPES[dtype][1]}) as "{name}"')
    return ", ".join(items)


def rows_table(rows: list[dict[str, Any]], spec: dict[str, str]) -> pa.Table:
    """An Arrow table of `spec`'s columns from dict rows (missing keys are null). A value of the
    wrong type (a hand-edited record) is null rather than an error."""
    arrays = []
    for name, dtype in spec.items():
        values, kind = [row.get(name) for row in rows], _TYPES[dtype][0]
        try:
            arrays.append(pa.array(values, type=kind))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([_coerce(v, kind) for v in values], type=kind))
    return pa.table(arrays, schema=arrow_schema(spec))


def _coerce(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_integer(kind):
        ok = type(value) is int and -(2**63) <= value < 2**63
        return value if ok else None
    if pa.types.is_floating(kind):
        return float(value) if type(value) in (int, float) else None
    if pa.types.is_boolean(kind):
        return value if type(value) is bool else None
    if pa.types.is_timestamp(kind):
        stamp = pd.to_datetime(value, utc=True, errors="coerce", format="ISO8601")
        return None if pd.isna(stamp) else stamp
    return value if type(value) is str else str(value)


def typed(table: pa.Table | None, spec: dict[str, str]) -> pa.Table:
    """`table` (None: no rows) with the columns of `spec` first, in order, each of the Arrow
    type its dtype converts from (a category dictionary-encoded); any further columns follow
    as they are."""
    schema = arrow_schema(spec)
    if table is None:
        table = schema.empty_table()
    table = table.select([*spec, *(n for n in table.column_names if n not in spec)])
    for name, dtype in spec.items():  # categories encoded in Arrow convert without a copy
        column, kind = table.column(name), schema.field(name).type
        if dtype == "category" and pa.types.is_dictionary(column.type):
            if column.type.value_type != kind:
                column = column.cast(pa.dictionary(column.type.index_type, kind))
        else:
            column = column.cast(kind) if column.type != kind else column
            column = pc.dictionary_encode(column) if dtype == "category" else column
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def to_pandas(table: pa.Table | None, spec: dict[str, str]) -> pd.DataFrame:
    """A typed DataFrame of `table` (None: no rows) with the columns of `spec` first, in order
    (any further columns of `table` follow)."""
    table = typed(table, spec)
    # Column by column, each freed once converted (the caller holds no other reference).
    frame = table.to_pandas(types_mapper=_PANDAS_TYPES.get, split_blocks=True, self_destruct=True)
    del table
    for name, dtype in spec.items():
        if dtype == "category":
            frame[name] = _string_categories(frame[name])
        elif dtype == "datetime" and len(frame) == 0:
            frame[name] = frame[name].astype("datetime64[us, UTC]")
    return frame


def _string_categories(column: pd.Series) -> pd.Series:
    """`column` as a category whose categories are pandas' nullable strings: its missing values
    then show as <NA>, like every other column's, instead of NaN. Only the categories are
    converted; the codes are kept."""
    if column.dtype != "category":
        column = column.astype("category")
    categories = column.cat.categories
    if categories.dtype == _STRING:
        return column
    codes = column.cat.codes.to_numpy()
    dtype = pd.CategoricalDtype(categories.astype(_STRING))
    return pd.Series(
        pd.Categorical.from_codes(codes, dtype=dtype), index=column.index, name=column.name
    )


_STRING = pd.StringDtype()
