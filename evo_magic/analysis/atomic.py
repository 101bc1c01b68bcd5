"""Files written whole or never (a temporary file, synced, then renamed over the target), and
file names made from ids that are data (a hash, never the id itself)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from evo_magic.analysis.datafiles import unique_temporary

if TYPE_CHECKING:
    import pyarrow as pa


def write_atomically(path: Path, data: bytes) -> None:
    """`path` holds `data` afterwards, or what it held before (a crash leaves no half file)."""
    tmp = path.with_name(unique_temporary(path.name))  # writers at once never share one
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_parquet_atomically(table: pa.Table, path: Path) -> None:
    """`table` as the Parquet file `path`, written whole or not at all."""
    import pyarrow.parquet as pq

    tmp = path.with_name(unique_temporary(path.name))
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def id_name(key: str) -> str:
    """A file name for the id `key`: the first 32 hex digits of its SHA-256."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
