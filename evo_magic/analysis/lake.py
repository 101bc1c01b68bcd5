"""The transcript lake: frames as Parquet, partitioned by source and session, and SQL over them.

    t.to_parquet("lake/")                         # lake/<frame>/source=.../session_id=.../*.parquet
    con = connect("lake/")                        # a DuckDB connection; every frame is a view
    con.sql("select source, count(*) from calls group by source").df()
    evo_magic.sql("select ... from blocks", "lake/")           # one query, as a DataFrame
    evo_magic.sql("select ... from calls", "~/.claude/projects/-home-me-proj")  # load, query

DuckDB reads only the partitions and columns a query needs, so a lake can hold far more
sessions than fit in memory, and many lakes (one per machine or run) can be read together by
giving `connect` their common parent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from evo_magic.analysis.datafiles import NotInside, no_links_below

FRAMES = ("blocks", "parts", "calls", "compactions", "events")
_PARTITIONS = ["source", "session_id"]


def write(frames: dict[str, pd.DataFrame], directory: Path) -> Path:
    """Write each frame under `directory/<name>/`, partitioned by source and session (an empty
    frame as one empty file, so that its view still has its columns). Returns `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    _refuse_links(directory)
    for name, frame in frames.items():
        table = pa.Table.from_pandas(frame, preserve_index=False)
        target = directory / name
        if table.num_rows == 0:
            target.mkdir(parents=True, exist_ok=True)
            for old in target.rglob("*.parquet"):
                old.unlink()
            import pyarrow.parquet as pq

            pq.write_table(table.drop_columns(_PARTITIONS), target / "empty.parquet")
            continue
        table = table.set_column(
            table.column_names.index("session_id"),
            "session_id",
            table.column("session_id").cast(pa.string()),  # plain strings to partition by
        )
        ds.write_dataset(
            table,
            target,
            format="parquet",
            partitioning=_PARTITIONS,
            partitioning_flavor="hive",
            existing_data_behavior="delete_matching",
        )
    return directory


def _refuse_links(directory: Path) -> None:
    """`NotInside` when a link is anywhere below `directory`: writing the frames through a
    folder replaced by a link would put them outside."""
    for folder, names, files in os.walk(directory, followlinks=False):
        for name in [*names, *files]:
            if os.path.islink(os.path.join(folder, name)):
                raise NotInside(
                    f"{os.path.join(folder, name)} is a link: nothing was written (the frames "
                    "are written only inside the folder)"
                )


def has_lake(directory: Path) -> bool:
    """Whether `directory` holds frames written by `Transcripts.to_parquet`."""
    return directory.is_dir() and any(directory.glob("**/blocks/**/*.parquet"))


def connect(directory: str | Path, con: duckdb.DuckDBPyConnection | None = None) -> Any:
    """A DuckDB connection with a view per frame found under `directory` (a lake written by
    `Transcripts.to_parquet`, or a folder of several): `blocks`, `parts`, `calls`,
    `compactions`, `events`."""
    root = Path(directory).expanduser()
    con = con or duckdb.connect()
    missing = []
    for name in FRAMES:
        # Only the lake's own files: none reached through a link (a folder replaced by one).
        found = [p for p in sorted(root.glob(f"**/{name}/**/*.parquet")) if no_links_below(root, p)]
        if not found:
            missing.append(name)
            continue
        listed = ", ".join(f"'{_quoted(str(path))}'" for path in found)
        con.execute(
            f"create or replace view {name} as select * from read_parquet("
            f"[{listed}], hive_partitioning = true, union_by_name = true)"
        )
    if len(missing) < len(FRAMES):  # a lake keeps no file of a frame without rows
        for name in missing:
            con.register(name, _empty(name))
    return con


def _empty(name: str) -> pd.DataFrame:
    """Frame `name` without rows, typed as a load types it."""
    from evo_magic.analysis.frames import EVENT_COLUMNS, to_pandas
    from evo_magic.analysis.frames import FRAMES as SPECS

    return to_pandas(None, SPECS.get(name, EVENT_COLUMNS))


def query(frames: dict[str, pd.DataFrame], sql_text: str) -> pd.DataFrame:
    """Run `sql_text` over in-memory frames (each registered under its name)."""
    con = duckdb.connect()
    try:
        for name, frame in frames.items():
            con.register(name, frame)
        return con.sql(sql_text).df()
    finally:
        con.close()


def _quoted(text: str) -> str:
    return text.replace("'", "''")
