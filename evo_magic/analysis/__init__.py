"""Transcripts as pandas DataFrames: evo_magic, Claude Code and Codex sessions alike.

    from evo_magic import load_transcripts
    t = load_transcripts("workspace/.evo_magic")      # every session under the root
    t.blocks.groupby(["session_id", "block_type"], observed=True).chars.sum()
    t.sql("select model, sum(output_tokens) from calls group by model")

`load_transcripts` (transcripts.py) reads files through the loader (loader.py: DuckDB's
`read_json`, one parse per format); each format's reader (formats/) decides what its records are
and where they sit; blocks.py turns messages into block rows (one SQL query); frames.py holds
the columns and dtypes (documented in docs/transcripts.md); conversation.py rebuilds a session's
messages in order for replay; lake.py writes the frames as Parquet and queries many sessions
with SQL. engine/ holds `Engine`, where a sweep over sessions runs (here, in worker processes or
on Dask). pandas, pyarrow and duckdb are imported by this package only, so that `import
evo_magic` stays cheap.
"""

from __future__ import annotations

from evo_magic.analysis.blocks import history_frame
from evo_magic.analysis.conversation import (
    Call,
    Compaction,
    Message,
    changes,
    conversation,
    conversations,
)
from evo_magic.analysis.engine import Engine
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    HISTORY_COLUMNS,
    IDENTITY,
    PART_COLUMNS,
)
from evo_magic.analysis.lake import connect
from evo_magic.analysis.transcripts import Transcripts, load_transcripts, sql

__all__ = [
    "BLOCK_COLUMNS",
    "CALL_COLUMNS",
    "COMPACTION_COLUMNS",
    "EVENT_COLUMNS",
    "HISTORY_COLUMNS",
    "IDENTITY",
    "PART_COLUMNS",
    "Call",
    "Compaction",
    "Engine",
    "Message",
    "TranscriptError",
    "TranscriptWarning",
    "Transcripts",
    "changes",
    "connect",
    "conversation",
    "conversations",
    "history_frame",
    "load_transcripts",
    "sql",
]
