"""Content blocks as rows, in SQL: one query turns the messages a format reader kept into the
rows of `blocks` (and the parts of their tool results into the rows of `parts`).

A format reader gives `units` (one row per record that holds blocks of a kept message: its
identity, message index, role, kind, where its first block sits) and `records` (the file's rows
as read, with each record's blocks as a list of `BLOCK`s and its line's raw text). The query
unnests the blocks, computes each one's columns, names each tool result after its call, and
orders the rows. `history_frame` runs the same query over a history in memory.

Text of a block: `text` for text, the JSON of `input` for tool_use (exactly as the file spells
it: DuckDB re-encodes JSON, so where its text is not found verbatim in the line, the file's own
bytes are taken), the content of a tool_result (its text parts joined by a newline when it is a
list), `thinking` for thinking. Images and documents have no text: `chars` is then the length of
their base64 data and `media_type` their type.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    HISTORY_COLUMNS,
    PART_COLUMNS,
    select_sql,
    to_pandas,
)
from evo_magic.analysis.loader import Engine
from evo_magic.measure import to_json

BLOCK = {
    "type": "VARCHAR",
    "text": "VARCHAR",
    "id": "VARCHAR",
    "name": "VARCHAR",
    "input": "JSON",
    "tool_use_id": "VARCHAR",
    "content": "JSON",
    "is_error": "BOOLEAN",
    "thinking": "VARCHAR",
    "source": {"media_type": "VARCHAR", "data": "VARCHAR"},
}
"""The fields of a content block that the frames use, as `read_json` reads them."""


def as_blocks(content: str) -> str:
    """SQL: the JSON `content` of a message (a list of blocks, or a string) as `BLOCK`s. DuckDB
    gives JSON re-encoded, so its first character tells a list from a string."""
    block = json.dumps(BLOCK)
    return f"""case when starts_with({content}, '[') then from_json({content}, '[{block}]')
        when starts_with({content}, '"') then [from_json(json_object('type', 'text', 'text',
            json_extract_string({content}, '$')), '{block}')] end"""


def text_sql(b: str) -> str:
    """SQL: the text of block `b` (see the module's docstring)."""
    return f"""case {b}.type
        when 'text' then {b}.text
        when 'tool_use' then coalesce({b}.input, '{{}}')::VARCHAR
        when 'tool_result' then case
            when {b}.content is null or {b}.content = 'null' then ''
            when starts_with({b}.content, '"') then json_extract_string({b}.content, '$')
            when starts_with({b}.content, '[') then array_to_string(list_filter(
                json_extract_string({b}.content, '$[*].text'), lambda t: t is not null), chr(10))
            else {b}.content::VARCHAR end
        when 'thinking' then {b}.thinking
        when 'image' then null
        when 'document' then null
        else {b}.text end"""


def blocks_sql(units: str, compacted: str = "null") -> str:
    """The query of the block rows of `units` (the name of a relation, or CTEs ending in one
    named `units`) over the registered `records` and `files`. `compacted` is an expression over
    a row (`r`) saying whether a per-call strategy later edited the block.

    A unit has: file_id and line (its record), the identity columns, message_index, role,
    message_kind, abandoned, status, parent_tool_use_id, first_block (the index of its first
    block in its message), path (where its block list is in the record: "message.content",
    "block"), branch (0, or the abandoned branch it is on), and `earlier`: the texts of a
    message's tool results as first recorded, which win over those of the unit (or null)."""
    prefix = units if units.lstrip().lower().startswith("with") else f"with units as ({units})"
    columns = select_sql(
        BLOCK_COLUMNS,
        tool_name="coalesce(r.tool_name, n.name)",
        text=_TEXT,
        chars=f"coalesce(length({_TEXT}), r.data_chars)",
        parts="json_array_length(r.part_list)",
        status=_STATUS,
        compacted=compacted,
        file="f.file",
        **{name: f"r.{name}" for name in ("agent_id", "tool_use_id", "line")},
    )
    return f"""{prefix},{_STEPS}
    select {columns}, r.file_id, r.branch, r.path, r.position, r.part_list,
        case when r.block_type = 'tool_use' and not contains(r.raw, r.text)
            then r.raw end as respell
    from described r join files f on f.file_id = r.file_id
    left join named n on r.block_type = 'tool_result' and r.tool_name is null
        and n.tool_use_id = r.tool_use_id and n.file_id = r.file_id
        and n.agent_id is not distinct from r.agent_id"""


_STEPS = f"""
    named as (
        select file_id, agent_id, b.id as tool_use_id, arg_min(b.name, line) as name from (
            select u.file_id, u.agent_id, u.line, unnest(r.content) as b
            from units u join records r using (file_id, line))
        where b.type = 'tool_use' group by all
    ),
    unnested as (
        select u.*, r.raw, unnest(r.content) as b,
            generate_subscripts(r.content, 1) - 1 as position
        from units u join records r using (file_id, line)
    ),
    described as (
        select * exclude (b), position + first_block as block_index, b.type as block_type,
            b.name as tool_name, coalesce(b.id, b.tool_use_id) as tool_use_id,
            case when b.type = 'tool_result' then coalesce(b.is_error, false) end as is_error,
            {text_sql("b")} as text,
            case when b.type = 'tool_result' and starts_with(b.content, '[')
                then b.content end as part_list,
            b.source.media_type as media_type, length(b.source.data) as data_chars
        from unnested
    )"""
"""The query's steps after the units: each tool call's name (a result names its call), the
units' blocks one per row, and each block's columns."""
_TEXT = "coalesce(list_filter(r.earlier, lambda e: e.id = r.tool_use_id)[1].text, r.text)"
_STATUS = """coalesce(r.status, case when r.is_error then 'error'
    when r.block_type = 'tool_result' then 'ok' end)"""
_ORDER = [
    "file_id",
    "agent_id",
    "branch",
    "segment",
    "epoch",
    "message_index",
    "block_index",
    "line",
]


_PARTS = f"""select {select_sql(PART_COLUMNS)} from (
    select rows.* exclude (text, chars, media_type), p.part_index - 1 as part_index,
        case when json_type(p.part) = 'OBJECT' then p.part->>'type'
            else lower(json_type(p.part)) end as part_type,
        case when p.part->>'type' = 'text' then p.part->>'text' end as text,
        coalesce(case when p.part->>'type' = 'text' then length(p.part->>'text') end,
            length(p.part->>'$.source.data')) as chars,
        p.part->>'$.source.media_type' as media_type
    from rows, unnest(from_json(part_list, '["JSON"]')) with ordinality as p(part, part_index)
    where part_list is not null)
    order by rows_order, part_index"""


def block_frames(engine: Engine, sql: str, **tables: Any) -> tuple[pa.Table, pa.Table]:
    """The rows of `blocks` and of `parts` from `sql` (a `blocks_sql` query): tool inputs
    respelled where the file spells them differently, in order (per file, the conversation
    then each agent, each branch, by segment, epoch, message, block and line)."""
    rows = _respell(engine.query(sql, **tables))
    order = pc.sort_indices(rows, sort_keys=[(key, "ascending", "at_start") for key in _ORDER])
    if not np.array_equal(order.to_numpy(), np.arange(rows.num_rows)):
        rows = rows.take(order)
    rows = rows.append_column("rows_order", pa.array(np.arange(rows.num_rows)))
    parts = engine.query(_PARTS, rows=rows.filter(pc.is_valid(rows.column("part_list"))))
    return rows.select(list(BLOCK_COLUMNS)), parts


def _respell(rows: pa.Table) -> pa.Table:
    """Rows whose tool input DuckDB spelt differently from the file take the file's text."""
    where = np.flatnonzero(pc.is_valid(rows.column("respell")).to_numpy(zero_copy_only=False))
    if len(where) == 0:
        return rows
    picked = rows.select(["respell", "path", "position", "text"]).take(where).to_pylist()
    texts = []
    for row in picked:
        path = [*row["path"].split("."), row["position"], "input"]
        texts.append(raw_value(row["respell"], path) or row["text"])
    for name, values in (("text", texts), ("chars", [len(t) for t in texts])):
        column = rows.column(name).combine_chunks()
        mask = np.zeros(rows.num_rows, dtype=bool)
        mask[where] = True
        fresh = pc.replace_with_mask(column, pa.array(mask), pa.array(values, column.type))
        rows = rows.set_column(rows.column_names.index(name), name, fresh)
    return rows


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def raw_value(text: str, path: list[Any]) -> str | None:
    """The JSON value at `path` (object keys and list positions; position 0 of an object is
    the object itself) of the JSON `text`, exactly as `text` spells it; None if absent."""
    at = 0
    try:
        for key in path:
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            opener = text[at]
            if isinstance(key, int) and opener == "{" and key == 0:
                continue
            if opener not in "{[" or isinstance(key, int) != (opener == "["):
                return None
            at, found, count = at + 1, False, 0
            while not found:
                at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
                if text[at] in "}]":
                    return None
                if opener == "{":
                    name, at = scanstring(text, at + 1)
                    at = _SPACE.match(text, at).end() + 1  # type: ignore[union-attr]
                    found = name == key
                else:
                    found, count = count == key, count + 1
                at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
                if not found:
                    _, at = _DECODER.raw_decode(text, at)
                    at = _SPACE.match(text, at).end() + 1  # type: ignore[union-attr]
        _, end = _DECODER.raw_decode(text, at)
        return text[at:end]
    except (ValueError, IndexError):
        return None


_HISTORY = f"""with records as (
        select 0 as file_id, line, raw, {as_blocks("(raw::JSON->'content')")} as content,
            raw::JSON->>'role' as role
        from messages
    ),
    units as (
        select file_id, line, line as message_index, role, 0 as first_block, 'content' as path,
            0 as branch, 0 as segment, 0 as epoch, null::STRUCT(id VARCHAR, text VARCHAR)[]
            as earlier, null as source, null as session_id, null as agent_id, null as sidechain,
            null as seq, null as timestamp, null as turn, null as message_kind,
            null as abandoned, null as status, null as parent_tool_use_id
        from records
    )"""


def history_frame(messages: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per content block of a history in Messages API shape (e.g. `session.messages`,
    as it is now: micro-compacted results show the placeholder), with the columns of
    `HISTORY_COLUMNS`, typed as in `Transcripts.blocks`."""
    raw = [to_json(m) for m in messages]
    table = pa.table({"line": range(len(raw)), "raw": pa.array(raw, pa.large_string())})
    files = pa.table({"file_id": [0], "file": [""]})
    engine = Engine()
    try:
        rows = _respell(engine.query(blocks_sql(_HISTORY), messages=table, files=files))
    finally:
        engine.close()
    return to_pandas(rows.select(list(HISTORY_COLUMNS)), HISTORY_COLUMNS)
