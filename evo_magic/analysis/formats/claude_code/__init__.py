"""Claude Code sessions: `~/.claude/projects/<project>/<session>.jsonl`, and their subagents
(`agent-<id>.jsonl` beside them, or `<session>/subagents/agent-<id>.jsonl`).

A few columns per record are read in SQL; the rest is decided here, per conversation (the main
one, and each subagent's, flagged `sidechain` with its `agent_id`):

- **Branches.** Records form a tree by `parentUuid`. The conversation is the chain from its last
  message back to the root (as Claude Code resumes it), crossing compact boundaries by
  `logicalParentUuid`; what hangs beside that chain belongs to it: the other records of a
  response on it (Claude Code 2.1 parents a later parallel `tool_use` on an earlier one or its
  result) and the results of its tool calls. A response's records are put together, before its
  results: one response, one message, one call. Any other record below a record of the chain
  is on an abandoned branch (a rewind): it is flagged `abandoned`, indexed as its own
  continuation of the fork, and sorted after the conversation instead of into it.
- **Messages.** Consecutive records of the same role form one message (Claude Code writes each
  block of a streamed response as its own record); a `compact_boundary` starts a new epoch.
- **Kinds of user message** (`message_kind`): `prompt` (typed by a person), `command` (a slash
  command sent to the model), `local_command` (one that ran locally), `command_output`,
  `meta` (caveats, expanded command prompts), `interrupt`, `task_notification`, `bash`,
  `memory`, `tool_result`, `compact_summary`. `turn` counts prompts and commands sent to the model.
- **Manual /compact.** Claude Code writes the command, its caveat and its output after the
  boundary and the summary, with earlier timestamps: they are put back at the end of the epoch
  they happened in.
- **Compactions.** Without `postTokens`, the size after is the next call's prompt. The
  compaction's own call (`agent-acompact-*.jsonl`) is linked to it (its `summary_*` usage),
  not read as a subagent.
- **Usage** counts are read as written and checked: one that is not a count is NA, warned.
- **Not calls.** Claude Code's placeholders for failed requests (`isApiErrorMessage`, model
  `<synthetic>`) are neither messages nor calls; the failures themselves (`system` records,
  subtype `api_error`) are in `events`.

`read` below takes the files together; the steps are modules: `records` (the fields read, the
kinds of user message), `branches` (the conversation's records and its abandoned branches),
`walk` (a file's conversations, record by record), `calls` (calls and compactions as rows).
"""

from __future__ import annotations

from typing import Any

from evo_magic.analysis.blocks import block_frames, blocks_sql
from evo_magic.analysis.formats import Part, is_claude_code
from evo_magic.analysis.formats.claude_code.calls import (
    add_summary_usage,
    fill_after_tokens,
    number,
    spawned_agents,
)
from evo_magic.analysis.formats.claude_code.records import SELECT, SOURCE, STRUCTURE, user_kind
from evo_magic.analysis.formats.claude_code.walk import ClaudeFile
from evo_magic.analysis.formats.registry import Format
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    IDENTITY,
    rows_table,
)
from evo_magic.analysis.loader import Engine, SourceFile

__all__ = ["SOURCE", "STRUCTURE", "read", "user_kind"]

_UNITS = """select *, null::VARCHAR as status,
    null::STRUCT(id VARCHAR, text VARCHAR)[] as earlier from claude_units"""
_UNIT = {
    **{name: dtype for name, dtype in BLOCK_COLUMNS.items() if name in IDENTITY},
    "message_index": "Int64",
    "role": "category",
    "message_kind": "category",
    "abandoned": "boolean",
    "parent_tool_use_id": "string",
    "file_id": "Int64",
    "line": "Int64",
    "first_block": "Int64",
    "path": "string",
    "branch": "Int64",
}
_LINKED = "claude_code: compaction's own call (linked to its compaction)"


def read(engine: Engine, sources: list[SourceFile]) -> Part:
    """The frames' rows of Claude Code session files."""
    records = engine.read(sources, STRUCTURE, SELECT, key="type")
    skipped: dict[str, int] = {}
    files = _walked(sources, records.drop_columns(["content", "raw"]).to_pylist(), skipped)
    _link_compaction_calls(files, skipped)
    calls = [row for file in files for row in file.calls]
    compactions = [row for file in files for row in file.compactions]
    number(calls)
    for row in compactions:
        summary = row.get("summary")
        row["summary_chars"] = len(summary) if isinstance(summary, str) else None
    units = rows_table([unit for file in files for unit in file.units], _UNIT)
    blocks, parts = block_frames(engine, blocks_sql(_UNITS), records=records, claude_units=units)
    return Part(
        blocks=blocks,
        parts=parts,
        calls=rows_table(calls, CALL_COLUMNS),
        compactions=rows_table(compactions, COMPACTION_COLUMNS),
        events=rows_table([row for file in files for row in file.identities], EVENT_COLUMNS),
        records=records.num_rows,
        skipped=skipped,
        without_messages=[file.source.name for file in files if file.without_messages],
    )


def _walked(
    sources: list[SourceFile], walked: list[dict[str, Any]], skipped: dict[str, int]
) -> list[ClaudeFile]:
    """Each file read: its conversations walked, its compactions given their size after."""
    by_file: dict[int, list[dict[str, Any]]] = {s.file_id: [] for s in sources}
    for record in walked:
        by_file[record["file_id"]].append(record)
    spawned = spawned_agents(walked)
    files = [ClaudeFile(s, by_file[s.file_id], spawned, skipped) for s in sources]
    for file in files:
        file.read()
        fill_after_tokens(file.compactions, file.calls)
    return files


def _link_compaction_calls(files: list[ClaudeFile], skipped: dict[str, int]) -> None:
    """A compaction's own call (`<session>/subagents/agent-acompact-*.jsonl`: the conversation
    sent again with the request to summarise it) is not a subagent: its usage becomes the
    `summary_*` usage of the compaction of its session that came next (by time), and its
    records are left out of `blocks` and `calls` (they stay in `events`). A file whose
    compaction is not among those read is kept as a subagent."""
    compactions = [
        row for f in files if not f.compaction_call for row in f.compactions if not row["agent_id"]
    ]
    for file in (f for f in files if f.compaction_call and f.calls):
        session = file.calls[0]["session_id"]
        end = max(c["timestamp"] for c in file.calls if c["timestamp"] is not None)
        after = [
            row
            for row in compactions
            if row["session_id"] == session
            and row["timestamp"] is not None
            and row["timestamp"] >= end
        ]
        if not after:
            continue
        add_summary_usage(min(after, key=lambda r: r["timestamp"]), file.calls)
        file.units, file.calls = [], []
        skipped[_LINKED] = skipped.get(_LINKED, 0) + 1


FORMAT = Format(
    name=SOURCE,
    reads="Claude Code sessions (~/.claude/projects/<project>/<session>.jsonl) and their subagents",
    recognised_by="JSON lines with a `type` and a `sessionId` or `uuid`, or only titles, "
    "file-history snapshots and queue operations",
    detect_hook=is_claude_code,
    read_hook=read,
)
"""The reader as registered (entry point `claude_code` of the group `evo_magic.formats`)."""
