"""What a load keeps apart from what it uses: the memory a batch of files needs is given back
before the next batch, so a load's peak is its frames plus one batch, not the sum of every
batch's leftovers.

A batch's rows are made among many short-lived buffers (DuckDB's results, Arrow's copies,
Python's records). Kept where they were made, every batch's rows pin pages of freed memory
around them, and the allocators cannot give those pages back. `settle` copies what is kept
into buffers of its own, in one allocator that holds nothing short-lived; `give_back` then
hands the freed memory of the batch back to the system.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc


def settle(table: pa.Table, categories: Collection[str] = ()) -> pa.Table:
    """`table` copied column by column into buffers of its own (the system allocator's), so
    that each column can be freed on its own later (a frame converted to pandas frees the
    columns it copies). The string columns named in `categories` (few values, many rows: a
    file's name, a role) are kept dictionary-encoded, as pandas will hold them."""
    pool = pa.system_memory_pool()
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        if name in categories and pa.types.is_large_string(column.type):
            column = pc.dictionary_encode(column, memory_pool=pool)
        if column.num_chunks:
            column = pa.chunked_array(
                [pa.concat_arrays(column.chunks, memory_pool=pool)], column.type
            )
        columns.append(column)
    return pa.table(columns, names=table.column_names).replace_schema_metadata(
        table.schema.metadata
    )


def gather(tables: Iterable[pa.Table], every: int = 256) -> list[pa.Table]:
    """Many small `tables` (read from as many files) as a few settled ones, `every` at a time:
    each read leaves buffers and overhead of its own (2,000 files of 74 MB of rows held 200 MB),
    and what a few hundred of them held is given back before the next ones are read."""
    gathered: list[pa.Table] = []
    batch: list[pa.Table] = []
    for table in tables:
        batch.append(table)
        if len(batch) == every:
            gathered.append(settle(pa.concat_tables(batch, promote_options="default")))
            batch.clear()
            give_back()
    if batch:
        gathered.append(settle(pa.concat_tables(batch, promote_options="default")))
    return gathered


def drained(tables: list[pa.Table]) -> pa.Table | None:
    """`tables` as one table (None: none), the list emptied: the caller then holds no other
    table of its columns, so a conversion with `self_destruct` frees each as it goes."""
    table = pa.concat_tables(tables, promote_options="default") if tables else None
    tables.clear()
    return table


def give_back() -> None:
    """Return the memory freed since the last call to the system: Arrow's pool, and the C
    allocator's free pages (glibc's `malloc_trim`, as Dask's workers do; elsewhere a no-op)."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl): nothing to trim
        return None


@contextmanager
def cycles_unchecked() -> Iterator[None]:
    """Python's cycle collector paused while the block runs, then as it was. A load makes
    hundreds of thousands of short-lived records and keeps many of them: each full collection
    walked every one of them again (a fifth of a load's CPU at 10 MB, an eighth at 100 MB),
    though the records hold no reference cycles (they are freed by their counts). The few
    cycles a load does make (DuckDB's results, pandas' objects) are freed batch by batch with
    `young_cycles_freed`, and by the collector once the block is over."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def young_cycles_freed() -> None:
    """Free the reference cycles among the objects made since the last call (collector paused
    or not): only those are looked at, not every object a load keeps, which is what makes a
    full collection slow. The survivors are not looked at again."""
    gc.collect(1)
