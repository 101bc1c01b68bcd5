"""A lake's small frames (`calls`, `compactions`) kept as one file of the whole lake,
`_frames/<name>.parquet`: reading thousands of small files costs seconds, one file
milliseconds. The file names each row's group and the lake's generation it was written at;
when the lake changed since, its rows of the groups still unchanged are kept, only the other
groups' files are read, and the file is written again."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import NotInside, open_inside, write_inside
from evo_magic.analysis.lake_manifest import generation as generation_of
from evo_magic.analysis.lake_manifest import written
from evo_magic.analysis.memory import drained, gather

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

CONSOLIDATED = ("calls", "compactions")
"""The small frames, also kept as one file of the whole lake."""
_GROUP = "_group"
"""The column of a consolidated file naming each row's group (dropped when read)."""
_MARK = b"evo_magic_generation"
"""The key of the file's metadata holding the lake's generation it was written at."""
Tables = Callable[[list[str]], Iterator[tuple[str, "pa.Table"]]]
"""The groups' own files of the frame, in the order of the keys given."""
Fresh = dict[str, dict[str, list["pa.Table"]]]
"""The rows a build wrote of the small frames: each group's (by key) tables of each frame, in
the order of its parts."""


class _Unreadable(Exception):
    """A part of a group the build kept cannot be read: the file is left for the first read
    of the frame, which reads that group again (`LakeIndex._reread`)."""


def write_built(
    lake: Path, groups: dict[str, dict[str, Any]], generation: str, fresh: Fresh
) -> None:
    """Bring the consolidated files up to date at the end of a build, from the rows it wrote
    (`fresh`, emptied as it goes): reading back the hundreds of parts just written cost a
    second at thousands of sessions. The groups the build kept are read from the file kept,
    or from their parts; when one cannot be read, the file is left as it is."""
    import pyarrow as pa

    from evo_magic.analysis.datafiles import parts_of

    def tables(name: str, keys: list[str]) -> Iterator[tuple[str, pa.Table]]:
        for key in keys:
            mine = fresh.get(key)
            if mine is not None:
                yield from ((key, as_read(table)) for table in mine.pop(name, []))
                continue
            for relative in written(groups[key]):
                if parts_of(relative)[0] == name:
                    try:
                        yield key, read_parquet_inside(lake, relative)
                    except (OSError, NotInside, pa.ArrowException) as exc:
                        raise _Unreadable(relative) from exc

    for name in CONSOLIDATED:
        with contextlib.suppress(_Unreadable):
            consolidated(lake, name, groups, generation, partial(tables, name))
    fresh.clear()


def consolidated(
    lake: Path, name: str, groups: dict[str, dict[str, Any]], generation: str, tables: Tables
) -> pa.Table | None:
    """Frame `name` of the lake's `groups` (the manifest's, in the lake's order) as one table
    (None: no rows), from its consolidated file brought up to date. A read-only lake is read
    from the groups' files every time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    relative = f"_frames/{name}.parquet"
    kept, since = _kept(lake, relative)
    if since is not None and str(since) == generation:
        return kept.drop_columns([_GROUP])
    names = [entry["name"] for entry in groups.values()]  # the lake's order
    unchanged = {
        entry["name"]
        for entry in groups.values()
        if since is not None and generation_of(entry) <= since
    }
    parts, ranks = [], []
    if kept is not None and unchanged:
        parts.append(kept.filter(pc.is_in(kept.column(_GROUP), pa.array(sorted(unchanged)))))
        ranks.append(pc.index_in(parts[-1].column(_GROUP), pa.array(names)).to_numpy())
    del kept  # its rows of changed groups are not held while the others are read
    todo = [key for key, entry in groups.items() if entry["name"] not in unchanged]
    parts += gather(_tagged(tables(todo), groups, names, ranks))
    whole = drained(parts)
    if whole is None:
        return None
    whole = _in_order(whole, ranks)
    whole = whole.replace_schema_metadata({**(whole.schema.metadata or {}), _MARK: generation})
    _write(lake, relative, whole)
    return whole.drop_columns([_GROUP])


def _kept(lake: Path, relative: str) -> tuple[pa.Table | None, int | None]:
    """The consolidated file and the generation it was written at; (None, None) when there is
    none yet, or it is unreadable, unmarked, or not a regular file inside the lake (then it is
    made again)."""
    import pyarrow as pa

    try:
        kept = read_parquet_inside(lake, relative)
    except (OSError, NotInside, pa.ArrowException):
        return None, None
    written = (kept.schema.metadata or {}).get(_MARK, b"")
    if _GROUP in kept.column_names and written.isdigit():
        return kept, int(written)
    return None, None


def as_read(table: pa.Table) -> pa.Table:
    """`table` as its Parquet file reads back (a category's values as `string`, not
    `large_string`, ...): the rows a build kept in memory join the rows read from files."""
    return table.cast(_read_schema(table.schema))


@lru_cache(maxsize=16)
def _read_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a Parquet file of `schema` reads back with (found by writing no rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    return pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema_arrow


def read_parquet_inside(lake: Path, relative: str) -> pa.Table:
    """The Parquet file `relative` of the lake (opened inside it, through no link: see
    `open_inside`), read whole into memory first: Arrow's reads through a Python file object
    cost milliseconds a file, which thousands of parts made seconds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open_inside(lake, relative) as handle:
        data = handle.read()
    return pq.ParquetFile(pa.BufferReader(data)).read()


def _tagged(
    found: Iterator[tuple[str, pa.Table]],
    groups: dict[str, dict[str, Any]],
    names: list[str],
    ranks: list[np.ndarray],
) -> Iterator[pa.Table]:
    """Each group's table with its group's name as a column; its rows' ranks (the group's place
    in the lake) added to `ranks`."""
    import numpy as np
    import pyarrow as pa

    rank = {group: n for n, group in enumerate(names)}
    for key, table in found:
        group = groups[key]["name"]
        ranks.append(np.full(table.num_rows, rank[group]))
        yield table.append_column(_GROUP, pa.array([group] * table.num_rows))


def _in_order(whole: pa.Table, ranks: list[np.ndarray]) -> pa.Table:
    """The rows in the order of the lake (kept rows come first, re-read ones after)."""
    import numpy as np
    import pyarrow as pa

    order = np.concatenate(ranks)
    if np.any(np.diff(order) < 0):
        return whole.take(pa.array(np.argsort(order, kind="stable")))
    return whole


def _write(lake: Path, relative: str, whole: pa.Table) -> None:
    import pyarrow.parquet as pq

    # A read-only lake (or a link in its place): read from the sessions' files every time.
    with contextlib.suppress(OSError, NotInside):
        write_inside(lake, relative, lambda handle: pq.write_table(whole, handle), durable=False)
