"""Content blocks as rows: the SQL that flattens recorded messages, and the same in Python.

A format reader decides which records are messages and where each sits in its conversation
(a "unit": file, line, JSON path of the content, identity, message index, ...); `BLOCKS_SQL`
then turns every unit's content into one row per block in DuckDB, and `PARTS_SQL` into one row
per part of a tool result whose content is a list. `block_row` does the same for one block in
Python (histories in memory, Codex items).

Text of a block: `text` for text, the compact JSON of `input` for tool_use (exactly as the file
holds it), the content of a tool_result (its text parts joined by a newline when it is a list),
`thinking` for thinking. Images and documents have no text: `chars` is then the length of their
base64 data and `media_type` their type.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

UNIT_COLUMNS = (
    "file_id",
    "line",
    "path",
    "first_block",
    "source",
    "session_id",
    "agent_id",
    "sidechain",
    "seq",
    "timestamp",
    "turn",
    "epoch",
    "segment",
    "message_index",
    "role",
    "message_kind",
    "abandoned",
    "status",
    "parent_tool_use_id",
    "file",
)
"""The columns of a units table (see `BLOCKS_SQL`)."""

_BLOCK = {
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
_PART = json.dumps(
    [{"type": "VARCHAR", "text": "VARCHAR", "source": {"media_type": "VARCHAR", "data": "VARCHAR"}}]
)
_IN_MESSAGE = json.dumps({"message": {"content": [_BLOCK]}})
_ONE = json.dumps({"block": _BLOCK})
_TEXT = json.dumps(_BLOCK)

BLOCKS_SQL = f"""
with listed as (
    select u.*, l.text as raw,
        case u.path
            when '$.block' then [from_json(l.text, '{_ONE}').block]
            else coalesce(from_json(l.text, '{_IN_MESSAGE}').message.content,
                case when json_type(l.text, '$.message.content') = 'VARCHAR'
                    then [from_json(json_object('type', 'text', 'text',
                        json_extract_string(l.text, '$.message.content')), '{_TEXT}')]
                end)
        end as blocks
    from {{units}} u join lines l using (file_id, line)
),
flat as (
    select listed.* exclude (blocks), unnest(blocks) as b,
        generate_subscripts(blocks, 1) - 1 + first_block as block_index
    from listed
),
typed as (
    select flat.* exclude (b), b.type as block_type, b.name as tool_name,
        coalesce(b.id, b.tool_use_id) as tool_use_id,
        case when b.type = 'tool_result' then coalesce(b.is_error, false) end as is_error,
        case b.type
            when 'text' then b.text
            when 'tool_use' then coalesce(b.input, '{{}}')::VARCHAR
            when 'tool_result' then case json_type(b.content)
                when 'VARCHAR' then json_extract_string(b.content, '$')
                when 'NULL' then ''
                when 'ARRAY' then array_to_string(list_filter(list_transform(
                    from_json(b.content, '{_PART}'),
                    lambda p: case p.type when 'text' then p.text end),
                    lambda t: t is not null), chr(10))
                else coalesce(b.content::VARCHAR, '')
            end
            when 'thinking' then b.thinking
            when 'image' then null
            when 'document' then null
            else b.text
        end as text,
        case when json_type(b.content) = 'ARRAY' then b.content end as part_list,
        b.source.media_type as media_type,
        length(b.source.data) as data_chars,
        b.type = 'tool_use' and b.input is not null
            and not contains(raw, b.input::VARCHAR) as respelled
    from flat
)
select * exclude (raw, data_chars),
    case when part_list is not null then json_array_length(part_list) end as parts,
    coalesce(length(text), data_chars) as chars
from typed
"""
"""One row per block of every unit in `{units}` (joined with `lines`): the unit's columns and
the block's. A unit's content is at `path`: `$.message.content` (a list of blocks, or a string
as one text block) or `$.block` (one block). A tool input that the file spells differently from
DuckDB's canonical JSON is marked `respelled`, to be replaced by the file's own bytes
(`raw_inputs`); `part_list` keeps a tool result's list content for `PARTS_SQL`."""

PARTS_SQL = f"""
with results as (
    select * exclude (part_list), from_json(part_list, '{_PART}') as part_items
    from {{rows}} where part_list is not null
),
each as (
    select results.* exclude (part_items), unnest(part_items) as p,
        generate_subscripts(part_items, 1) - 1 as part_index
    from results
)
select each.* exclude (p, text, chars, media_type), p.type as part_type,
    case p.type when 'text' then p.text end as text,
    coalesce(length(case p.type when 'text' then p.text end), length(p.source.data)) as chars,
    p.source.media_type as media_type
from each
"""
"""One row per part of every tool result (of the block rows in `{rows}`) whose content is a
list."""


class _Block(msgspec.Struct):
    input: msgspec.Raw = msgspec.Raw(b"null")


def raw_inputs(line: bytes, path: str) -> list[bytes] | None:
    """The tool_use inputs of the content at `path` (a JSON path like `$.message.content`) of one
    line, exactly as the file spells them (None where a block has none); None when the content is
    not a list of objects."""
    keys = path.removeprefix("$.").split(".")
    target: Any = list[_Block]
    for key in reversed(keys):
        target = msgspec.defstruct("_At", [(key, target | None, None)])
    try:
        value: Any = msgspec.json.decode(line, type=target)
    except msgspec.DecodeError:
        return None
    for key in keys:
        value = getattr(value, key)
        if value is None:
            return None
    return [None if bytes(b.input) == b"null" else bytes(b.input) for b in value]


def _parts_text(content: list[Any]) -> str:
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def block_row(block: Any) -> dict[str, Any]:
    """One block's columns (block_type, tool_name, tool_use_id, is_error, text, chars, parts,
    media_type), as `BLOCKS_SQL` computes them."""
    if not isinstance(block, dict):
        return {"block_type": type(block).__name__}
    kind = block.get("type")
    row: dict[str, Any] = {"block_type": kind}
    text: Any = None
    if kind == "text":
        text = block.get("text")
    elif kind == "tool_use":
        row["tool_name"], row["tool_use_id"] = block.get("name"), block.get("id")
        text = msgspec.json.encode(block.get("input", {})).decode()
    elif kind == "tool_result":
        row["tool_use_id"] = block.get("tool_use_id")
        row["is_error"] = bool(block.get("is_error"))
        content = block.get("content", "")
        if isinstance(content, list):
            row["parts"] = len(content)
            text = _parts_text(content)
        else:
            text = "" if content is None else content
    elif kind == "thinking":
        text = block.get("thinking")
    else:
        row["tool_use_id"] = block.get("id")
        text = block.get("text")
    source = block.get("source")
    if isinstance(source, dict):
        row["media_type"] = source.get("media_type")
        if isinstance(source.get("data"), str):
            row["chars"] = len(source["data"])
    if not isinstance(text, str):
        text = None if text is None else str(text)
    row["text"] = text
    if text is not None:
        row["chars"] = len(text)
    return row
