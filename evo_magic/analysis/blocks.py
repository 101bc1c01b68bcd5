"""Content blocks as rows: computed per message in DuckDB, flattened in Arrow, and the same for
one block in Python.

`blocks_sql(content)` turns a DuckDB list of blocks (read with the `BLOCK` type) into a list of
structs holding each block's columns, in the same pass that reads the file. `flatten` then makes
one row per block of the messages a format reader kept, each with its message's columns (a
"unit": identity, message index, role, kind, ...), without leaving Arrow. `block_row` does the
same for one block in Python (histories in memory, Codex items).

Text of a block: `text` for text, the compact JSON of `input` for tool_use (exactly as the file
spells it: see `respell`), the content of a tool_result (its text parts joined by a newline when
it is a list), `thinking` for thinking. Images and documents have no text: `chars` is then the
length of their base64 data and `media_type` their type.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.frames import HISTORY_COLUMNS, PART_COLUMNS, rows_table, to_pandas

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


def block_type_sql() -> str:
    """`BLOCK` as a DuckDB type."""
    inner = ", ".join(
        f'"{k}" ' + ("STRUCT(media_type VARCHAR, data VARCHAR)" if isinstance(v, dict) else v)
        for k, v in BLOCK.items()
    )
    return f"STRUCT({inner})"


def blocks_sql(content: str) -> str:
    """A DuckDB expression: the list `content` (of `BLOCK`s) as a list of each block's columns.
    A tool result's content (JSON text) is told apart by its first character: a string, a list
    of parts, or something else."""
    return f"""list_transform({content}, lambda b: {{
        'block_type': b.type,
        'tool_name': b.name,
        'tool_use_id': coalesce(b.id, b.tool_use_id),
        'is_error': case when b.type = 'tool_result' then coalesce(b.is_error, false) end,
        'text': case b.type
            when 'text' then b.text
            when 'tool_use' then coalesce(b.input, '{{}}')::VARCHAR
            when 'tool_result' then case
                when b.content is null or b.content = 'null' then ''
                when starts_with(b.content, '"') then json_extract_string(b.content, '$')
                when starts_with(b.content, '[') then array_to_string(list_filter(
                    json_extract_string(b.content, '$[*].text'), lambda t: t is not null),
                    chr(10))
                else b.content::VARCHAR
            end
            when 'thinking' then b.thinking
            when 'image' then null
            when 'document' then null
            else b.text
        end,
        'parts': case when b.type = 'tool_result' and starts_with(b.content, '[')
            then json_array_length(b.content) end,
        'part_list': case when b.type = 'tool_result' and starts_with(b.content, '[')
            then b.content::VARCHAR end,
        'media_type': b.source.media_type,
        'data_chars': length(b.source.data)
    }})"""


def flatten(lists: pa.ChunkedArray | pa.Array, units: pa.Table, keep: np.ndarray) -> pa.Table:
    """One row per block of the records where `keep` is true: the record's row of `units`
    (which must have `first_block`, the index of its first block in its message), `position`
    (the block's place in the record's list) and `block_index`, then the block's columns
    (from `blocks_sql`)."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    parents = pc.list_parent_indices(lists)
    chosen = pc.array_take(pa.array(keep, pa.bool_()), parents)  # only the kept blocks' text
    parents = parents.filter(chosen)
    values = pc.list_flatten(lists).filter(chosen)
    parent = parents.to_numpy()
    position = np.arange(len(chosen), dtype=np.int64)[chosen.to_numpy(zero_copy_only=False)]
    offsets = lists.offsets.to_numpy()
    position = position - (offsets[parent] - offsets[0])
    rows = units.take(parents)
    first = pc.fill_null(rows.column("first_block"), 0).to_numpy().astype(np.int64)
    rows = rows.drop_columns(["first_block"]).append_column("record", parents)
    rows = rows.append_column("position", pa.array(position))
    rows = rows.append_column("block_index", pa.array(position + first))
    for name in values.type.names:
        rows = rows.append_column(name, values.field(name))
    return rows


def finish(rows: pa.Table, sources: dict[int, Any]) -> pa.Table:
    """Block rows made whole: tool inputs in the file's own spelling, `chars`, each tool
    result named after its call, and `status` (`ok`/`error` where the record has none).
    `sources` maps each file_id to its `SourceFile` (for its bytes)."""
    rows = respell(rows, sources)
    text = rows.column("text")
    chars = pc.coalesce(pc.utf8_length(text).cast(pa.int64()), rows.column("data_chars"))
    rows = rows.drop_columns(["data_chars", "position"]).append_column("chars", chars)
    rows = _name_results(rows)
    status = rows.column("status") if "status" in rows.column_names else None
    derived = pc.if_else(
        pc.equal(rows.column("block_type"), "tool_result"),
        pc.if_else(pc.fill_null(rows.column("is_error"), False), "error", "ok"),
        pa.nulls(rows.num_rows, pa.string()),
    )
    status = derived if status is None else pc.coalesce(status.cast(pa.string()), derived)
    if "status" in rows.column_names:
        rows = rows.drop_columns(["status"])
    return rows.append_column("status", status)


def _name_results(rows: pa.Table) -> pa.Table:
    """tool_name of each tool_result: that of the tool_use with its id, in the same file and
    conversation."""
    key = ["file_id", "agent_id", "tool_use_id"]
    frame = rows.select([*key, "block_type", "tool_name"]).to_pandas()
    uses = frame.loc[frame["block_type"] == "tool_use", [*key, "tool_name"]]
    results = frame[(frame["block_type"] == "tool_result") & frame["tool_name"].isna()]
    if uses.empty or results.empty:
        return rows
    found = results[key].reset_index().merge(uses.drop_duplicates(key), on=key, how="inner")
    found = found.sort_values("index")
    return replace(rows, "tool_name", found["index"].to_numpy(), found["tool_name"].tolist())


def replace(rows: pa.Table, name: str, where: np.ndarray, values: list[Any]) -> pa.Table:
    """`rows` with column `name` set to `values` at the rows `where` (ascending)."""
    column = rows.column(name).combine_chunks()
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[where] = True
    fresh = pc.replace_with_mask(column, pa.array(mask), pa.array(values, column.type))
    return rows.set_column(rows.column_names.index(name), name, fresh)


class _Block(msgspec.Struct):
    input: msgspec.Raw = msgspec.Raw(b"null")


def raw_inputs(line: bytes, path: tuple[str, ...]) -> list[bytes] | None:
    """The tool_use inputs of the block list at `path` (keys, e.g. ("message", "content")) of
    one line, exactly as the file spells them (None where a block has none); None when there is
    no such list."""
    target: Any = list[_Block]
    for key in reversed(path):
        target = msgspec.defstruct("_At", [(key, target | None, None)])
    try:
        value: Any = msgspec.json.decode(line, type=target)
    except msgspec.DecodeError:
        return None
    for key in path:
        value = getattr(value, key)
        if value is None:
            return None
    return [None if bytes(b.input) == b"null" else bytes(b.input) for b in value]


def respell(rows: pa.Table, sources: dict[int, Any]) -> pa.Table:
    """Tool inputs as the file spells them. DuckDB re-encodes JSON canonically; where that text
    is not found verbatim in the record's line (another writer's escapes or number format), the
    file's own bytes are taken instead. Needs `path` (the block list's keys, joined by ".")."""
    uses = np.flatnonzero(pc.equal(rows.column("block_type"), "tool_use").to_numpy(False))
    if len(uses) == 0:
        return rows.drop_columns(["path"])
    chosen = rows.select(["file_id", "line", "text", "path", "position"]).take(pa.array(uses))
    fixes: dict[int, str] = {}
    cache: dict[tuple[int, int], list[bytes] | None] = {}
    files = chosen.column("file_id").to_numpy()
    numbers = chosen.column("line").to_numpy()
    texts = chosen.column("text").to_pylist()
    for file_id in np.unique(files).tolist():
        source = sources[file_id]
        mine = np.flatnonzero(files == file_id)
        at = np.searchsorted(source.numbers, numbers[mine])
        starts, ends, data = source.starts[at].tolist(), source.ends[at].tolist(), source.data
        for k, start, end in zip(mine.tolist(), starts, ends, strict=True):
            text = texts[k]
            if text is None or data.find(text.encode(), start, end) >= 0:
                continue
            key = (file_id, int(numbers[k]))
            if key not in cache:
                path = tuple(chosen.column("path")[k].as_py().split("."))
                cache[key] = raw_inputs(data[start:end], path)
            found, place = cache[key], chosen.column("position")[k].as_py()
            if found is not None and 0 <= place < len(found) and found[place] is not None:
                fixes[int(uses[k])] = found[place].decode("utf-8")
    rows = rows.drop_columns(["path"])
    if not fixes:
        return rows
    where = sorted(fixes)
    return replace(rows, "text", np.array(where), [fixes[row] for row in where])


def parts_table(rows: pa.Table) -> pa.Table:
    """One row per part of each tool result whose content is a list (`part_list`)."""
    listed = np.flatnonzero(pc.is_valid(rows.column("part_list")).to_numpy(False))
    found: list[dict[str, Any]] = []
    if len(listed):
        chosen = rows.take(pa.array(listed)).to_pylist()
        for row in chosen:
            for n, part in enumerate(json.loads(row["part_list"])):
                found.append({**row, **part_row(part), "part_index": n})
    return rows_table(found, PART_COLUMNS)


def part_row(part: Any) -> dict[str, Any]:
    """A part's columns: part_type, text, chars, media_type."""
    if not isinstance(part, dict):
        return {"part_type": type(part).__name__}
    kind = part.get("type")
    text = part.get("text") if kind == "text" and isinstance(part.get("text"), str) else None
    source = part.get("source") if isinstance(part.get("source"), dict) else {}
    data = source.get("data")
    return {
        "part_type": kind,
        "text": text,
        "chars": len(text) if text is not None else (len(data) if isinstance(data, str) else None),
        "media_type": source.get("media_type"),
    }


def _parts_text(content: list[Any]) -> str:
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def block_row(block: Any) -> dict[str, Any]:
    """One block's columns (block_type, tool_name, tool_use_id, is_error, text, chars, parts,
    media_type), as `blocks_sql` and `finish` compute them."""
    if not isinstance(block, dict):
        return {"block_type": type(block).__name__}
    kind = block.get("type")
    row: dict[str, Any] = {"block_type": kind}
    text: Any = None
    if kind == "text":
        text = block.get("text")
    elif kind == "tool_use":
        row["tool_name"], row["tool_use_id"] = block.get("name"), block.get("id")
        text = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
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


def history_frame(messages: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per content block of a history in Messages API shape (e.g. `session.messages`,
    as it is now: micro-compacted results show the placeholder), with the columns of
    `HISTORY_COLUMNS`, typed as in `Transcripts.blocks`."""
    rows: list[dict[str, Any]] = []
    names: dict[Any, Any] = {}
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for position, block in enumerate(content if isinstance(content, list) else []):
            row = block_row(block)
            if row["block_type"] == "tool_use":
                names[row["tool_use_id"]] = row["tool_name"]
            elif row["block_type"] == "tool_result":
                row["tool_name"] = names.get(row["tool_use_id"])
            rows.append({**row, "message_index": index, "role": role, "block_index": position})
    return to_pandas(rows_table(rows, HISTORY_COLUMNS), HISTORY_COLUMNS)
