"""A batch's rows written as the lake's parts: each frame's table cut by group (by each row's
file) into contiguous slices, each written as `<frame>/source=<source>/<group>.parquet`."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import write_inside

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_SOURCES = ("evo_magic", "claude_code", "codex")


def ranks_of(table: pa.Table, group_of: dict[str, str]) -> np.ndarray:
    """Each row's group, as its place among the batch's groups (by the row's file)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rank = {key: n for n, key in enumerate(dict.fromkeys(group_of.values()))}
    files = table.column("file").combine_chunks()
    if not pa.types.is_dictionary(files.type):
        files = pc.dictionary_encode(files)
    of_value = np.array([rank[group_of[name]] for name in files.dictionary.to_pylist()], np.int64)
    return of_value[files.indices.to_numpy(zero_copy_only=False)]


def note_sessions(
    blocks: pa.Table, ranks: np.ndarray, entries: dict[str, dict[str, Any]], keys: list[str]
) -> None:
    """Each group's sessions, in the order their blocks come."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sessions = pc.dictionary_encode(blocks.column("session_id").cast(pa.string()))
    seen: set[tuple[int, str]] = set()
    at = 0
    for chunk in sessions.chunks:
        values = chunk.dictionary.to_pylist()
        codes = chunk.indices.to_numpy(zero_copy_only=False)
        mine = ranks[at : at + len(chunk)]
        at += len(chunk)
        for group, code in dict.fromkeys(zip(mine.tolist(), codes.tolist(), strict=True)):
            found = (group, values[code])
            if found not in seen:
                seen.add(found)
                entries[keys[group]]["sessions"].append(str(values[code]))


def split(
    table: pa.Table, ranks: np.ndarray, group_of: dict[str, str]
) -> Iterator[tuple[str, pa.Table]]:
    """The table's rows per group (`ranks`: each row's), cut into contiguous slices."""
    import numpy as np
    import pyarrow as pa

    groups = list(dict.fromkeys(group_of.values()))
    order = np.argsort(ranks, kind="stable")
    if np.any(np.diff(ranks) < 0):
        table = table.take(pa.array(order))
    table = widened(table)
    bounds = np.searchsorted(ranks[order], np.arange(len(groups) + 1))
    for n, key in enumerate(groups):
        yield key, table.slice(int(bounds[n]), int(bounds[n + 1] - bounds[n]))


def widened(table: pa.Table) -> pa.Table:
    """The table with every category column's codes as int32: pandas picks the narrowest
    width per frame, and files of different widths would not read back as one table."""
    import pyarrow as pa

    fields = [
        field.with_type(pa.dictionary(pa.int32(), field.type.value_type))
        if pa.types.is_dictionary(field.type)
        else field
        for field in table.schema
    ]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def write_part(
    root: Path, frame_name: str, entry: dict[str, Any], part: pa.Table, writes: Writes | None = None
) -> list[pa.Table]:
    """One group's rows of one frame as `<frame>/source=<source>/<group>.parquet`, named in
    `entry["written"]` now and written by `writes` (at once without it); the tables written,
    in the order of their names (what reading the parts back gives). Written through no
    link: a folder of the lake replaced by a link makes the build fail, never write outside."""
    import pyarrow.compute as pc

    if part.num_rows == 0:
        return []  # nothing to read back: a frame without rows in any group is typed by its spec
    sources = [None]
    if part.num_rows and "source" in part.column_names:
        found = pc.unique(part.column("source").cast("string")).to_pylist()
        sources = [s for s in found if s in _SOURCES] or [None]
    done = []
    for source in sources:
        rows = part
        if source is not None and len(sources) > 1:
            rows = part.filter(pc.equal(part.column("source").cast("string"), source))
        relative = f"{frame_name}/source={source or 'none'}/{entry['name']}.parquet"
        entry["written"].append(relative)
        if writes is None:
            _write(root, relative, rows)
        else:
            writes.submit(root, relative, rows)
        done.append(rows)
    return done


def _write(root: Path, relative: str, rows: pa.Table) -> None:
    import pyarrow.parquet as pq

    # Not flushed file by file (a flush each cost more than the write): a part a crash tore
    # is found unreadable when read, and its session read again (`LakeIndex._reread`). No
    # column statistics: a part is one session's, read whole, and they were a fifth of the
    # writer's time (which competes with the parse on two cores).
    write_inside(
        root,
        relative,
        lambda handle: pq.write_table(rows, handle, write_statistics=False),
        durable=False,
    )


class Writes:
    """Parts written in a thread of their own while the next batch is read: a write waits
    mostly on the disk, the read mostly on the processor, so the two overlap even on one
    core. At most one batch's parts wait to be written (`wait` before the next batch's),
    and the first write that failed raises from `wait`; `close` waits for all of them."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="evo-lake-write")
        self._pending: list[Future[None]] = []

    def submit(self, root: Path, relative: str, rows: pa.Table) -> None:
        self._pending.append(self._pool.submit(_write, root, relative, rows))

    def wait(self) -> None:
        """Every part submitted so far written (the first failure raised)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        """Wait for every write (even after a failure elsewhere: none may go on after the
        lake's lock is released), then stop the thread."""
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> Writes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
