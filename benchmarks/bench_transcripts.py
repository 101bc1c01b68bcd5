"""Benchmark: loading transcripts into pandas, against the other engines on the same file.

Generates a realistic transcript of 100,000 content blocks (~59 MB) through `Transcript`, then
times, side by side in one process (interleaved, median of the runs):

- `load_transcripts` (DuckDB engine: every frame, typed, checked line by line);
- DuckDB's `read_json` flattened to one row per block with the same block columns (the fastest
  engine's like-for-like flatten, no calls/compactions, no line numbers or corrupt-line report);
- `pyarrow.json.read_json` (records only, no flattening);
- orjson per line + a Python flatten to the same block rows;
- the plain baseline: `json.loads` per line + `pandas.json_normalize`;

and the writer's cost per appended record.

    python -m benchmarks.bench_transcripts            # prints a table
    python -m benchmarks.bench_transcripts --blocks 20000

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import random
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.transcript import Transcript

BLOCKS = 100_000
RUNS = 3
LOAD_SECONDS_TARGET = 1.0
SPEEDUP_TARGET = 3.0
FLATTEN_RATIO_TARGET = 1.0
"""load_transcripts / DuckDB like-for-like flatten: at most this (at least as fast)."""
APPEND_MS_TARGET = 1.0

# Words for plausible tool output and prose (a list of words reads better as text).
_WORDS = (  # noqa: SIM905
    "def class return import self value samples freezer rack position barcode status None if "
    "else for in range len print assert True False path open read write line count total TODO "
    "fixme error warning result data frame index column"
).split()


def _corpus(seed: int = 1, chars: int = 200_000) -> str:
    rng = random.Random(seed)
    lines = []
    while sum(map(len, lines)) < chars:
        lines.append(
            "    " * rng.randint(0, 3) + " ".join(rng.choices(_WORDS, k=rng.randint(3, 12)))
        )
    return "\n".join(lines)


_CORPUS = _corpus()


@dataclass
class _Generator:
    """Writes a plausible session: asks, tool batches, micro and full compactions, merges."""

    transcript: Transcript
    rng: random.Random
    blocks: int = 0
    messages: int = 0
    epoch: int = 0
    turn: int = 0
    call: int = 0
    tool_id: int = 0
    last_results: list[dict[str, Any]] = field(default_factory=list)

    def text(self, low: int, high: int) -> str:
        n = self.rng.randint(low, high)
        start = self.rng.randrange(len(_CORPUS) - n)
        return _CORPUS[start : start + n]

    def context(self) -> dict[str, Any]:
        chars = 2_000 + 800 * self.messages
        return {
            "messages": self.messages,
            "chars": chars,
            "tokens": chars // 4,
            "tokens_exact": False,
        }

    def message(self, role: str, content: list[dict[str, Any]], index: int | None = None) -> None:
        """Record a new message, or (with `index`) one that grew: only new blocks count."""
        if index is None:
            index = self.messages
            self.messages += 1
            self.blocks += len(content)
        else:
            self.blocks += len(content) - len(self.last_results)
        message = {"role": role, "content": content}
        self.transcript.write(
            "message", {"index": index, "message": message, "turn": self.turn, "epoch": self.epoch}
        )

    def ask(self) -> None:
        self.turn += 1
        prompt = self.text(40, 300)
        self.transcript.write("ask_started", {"text": prompt, "context": self.context()})
        block = {"type": "text", "text": prompt}
        if self.last_results and self.rng.random() < 0.1:
            # The last ask stopped after a tool batch: the prompt merges into that message,
            # which is recorded again whole under the same index.
            self.message("user", [*self.last_results, block], index=self.messages - 1)
        else:
            self.message("user", [block])
        self.last_results = []

    def step(self) -> list[str]:
        self.call += 1
        usage = {
            "input_tokens": 200 * self.messages,
            "output_tokens": self.rng.randint(20, 400),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 100 * self.messages,
        }
        self.transcript.write(
            "model_response",
            {
                "call": self.call,
                "turn": self.turn,
                "model": "claude-sonnet-4-5",
                "stop_reason": "tool_use",
                "usage": usage,
                "duration": self.rng.uniform(0.5, 9.0),
                "context_before_micro": self.context(),
                "context_sent": self.context(),
            },
        )
        uses = []
        for _ in range(self.rng.choice((1, 2, 2, 3))):
            self.tool_id += 1
            name = self.rng.choice(("bash", "bash", "read_file", "edit_file"))
            tool_input = (
                {"command": self.text(10, 80)}
                if name == "bash"
                else {"path": f"src/m{self.tool_id % 50}.py"}
            )
            uses.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{self.tool_id:08d}",
                    "name": name,
                    "input": tool_input,
                }
            )
        self.message("assistant", [{"type": "text", "text": self.text(40, 300)}, *uses])
        results = []
        for use in uses:
            output = self.text(50, 450)
            self.transcript.write(
                "tool_finished",
                {
                    "tool_use_id": use["id"],
                    "name": use["name"],
                    "input": use["input"],
                    "is_error": False,
                    "duration": self.rng.uniform(0.001, 2.0),
                    "saved_to": None,
                    "original_chars": len(output),
                },
            )
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": output})
        self.message("user", results)
        self.last_results = results
        return [use["id"] for use in uses]

    def micro(self, ids: list[str]) -> None:
        before = self.context()
        self.transcript.write(
            "micro_compaction",
            {"cleared_ids": ids, "chars_freed": 900 * len(ids), "before": before, "after": before},
        )

    def compaction(self) -> None:
        before = self.context()
        self.transcript.snapshot([{"role": "user", "content": "(history)"}])
        self.epoch += 1
        self.messages = 0
        summary = self.text(600, 2_000)
        self.message("user", [{"type": "text", "text": summary}])
        self.transcript.write(
            "compaction",
            {
                "trigger": self.rng.choice(("auto", "model", "user")),
                "focus": None,
                "before": before,
                "after": self.context(),
                "success": True,
                "duration": self.rng.uniform(2, 20),
                "summary": summary,
                "error": None,
                "snapshot_path": None,
                "summary_usage": {
                    "input_tokens": 20_000,
                    "output_tokens": 700,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        )


def generate(root: Path, blocks: int = BLOCKS, seed: int = 0) -> Path:
    """Write a transcript of about `blocks` content blocks under `root`; returns its file."""
    transcript = Transcript(root)
    gen = _Generator(transcript, random.Random(seed))
    transcript.write("session_start", {"model": "claude-sonnet-4-5", "tools": ["bash"]})
    pending: list[str] = []
    while gen.blocks < blocks:
        gen.ask()
        for _ in range(gen.rng.randint(2, 8)):
            pending += gen.step()
            if len(pending) > 6:
                gen.micro(pending[:3])
                pending = pending[3:]
            if gen.messages > 60:
                gen.compaction()
                gen.last_results = []
                pending = []
        transcript.write("ask_finished", {"text": "done", "turns": 3, "stop_reason": "end_turn"})
    transcript.close()
    return transcript.path


def baseline(path: Path) -> Any:
    """The plain way: `json.loads` per line, then `pandas.json_normalize`."""
    import pandas as pd

    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return pd.json_normalize(records)


_BLOCK = (
    "STRUCT(type VARCHAR, text VARCHAR, id VARCHAR, name VARCHAR, input JSON, "
    "tool_use_id VARCHAR, content JSON, is_error BOOLEAN)"
)
DUCKDB_FLATTEN = f"""
with r as (
    select * from read_json(?, format = 'newline_delimited', ignore_errors = true,
        columns = {{v: 'BIGINT', session_id: 'VARCHAR', seq: 'BIGINT', ts: 'VARCHAR',
            kind: 'VARCHAR', turn: 'BIGINT', epoch: 'BIGINT', "index": 'BIGINT',
            message: 'STRUCT(role VARCHAR, content {_BLOCK}[])'}})
    where kind = 'message'
),
b as (
    select session_id, seq, ts, turn, epoch, "index", message.role as role,
        unnest(message.content) as blk, generate_subscripts(message.content, 1) - 1 as bi
    from r
)
select session_id, seq, try_cast(ts as TIMESTAMPTZ) as timestamp, turn, epoch,
    "index" as message_index, role, bi as block_index, blk.type as block_type,
    blk.name as tool_name, coalesce(blk.id, blk.tool_use_id) as tool_use_id,
    blk.is_error as is_error,
    case blk.type when 'text' then blk.text when 'tool_use' then blk.input::VARCHAR
        when 'tool_result' then blk.content->>'$' end as text
from b order by seq, block_index
"""


def duckdb_flatten(path: Path) -> Any:
    """DuckDB's own reader, flattened to one row per block, as a DataFrame typed like
    `Transcripts.blocks` (the like-for-like reference)."""
    import duckdb

    from evo_magic.analysis.frames import BLOCK_COLUMNS, to_pandas

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    try:
        table = con.sql(DUCKDB_FLATTEN, params=[str(path)]).to_arrow_table()
    finally:
        con.close()
    spec = {name: BLOCK_COLUMNS[name] for name in table.column_names}
    return to_pandas(table, spec)


def pyarrow_records(path: Path) -> Any:
    """pyarrow's JSON reader: records only, nested columns left nested."""
    from pyarrow import json as pa_json

    return pa_json.read_json(path).to_pandas()


def orjson_flatten(path: Path) -> Any:
    """orjson per line and a Python loop to the same block rows."""
    import orjson
    import pandas as pd

    rows = []
    with open(path, "rb") as f:
        for line in f:
            record = orjson.loads(line)
            if record.get("kind") != "message":
                continue
            message = record["message"]
            for i, block in enumerate(message.get("content") or []):
                kind = block.get("type")
                if kind == "tool_use":
                    value = orjson.dumps(block.get("input")).decode()
                elif kind == "tool_result":
                    value = block.get("content")
                else:
                    value = block.get("text")
                rows.append(
                    (
                        record["session_id"],
                        record["seq"],
                        record["ts"],
                        record.get("turn"),
                        record.get("epoch"),
                        record["index"],
                        message["role"],
                        i,
                        kind,
                        block.get("name"),
                        block.get("id") or block.get("tool_use_id"),
                        block.get("is_error"),
                        value,
                    )
                )
    return pd.DataFrame(rows)


def ours(path: Path) -> Any:
    from evo_magic.analysis import load_transcripts

    return load_transcripts(path)


def _code_lines() -> int:
    """Lines of the analysis package (the loader was 1,261 lines in one file before)."""
    root = Path(__file__).resolve().parent.parent / "evo_magic" / "analysis"
    return sum(len(p.read_text().splitlines()) for p in root.rglob("*.py"))


def _seconds(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    result = function()
    elapsed = time.perf_counter() - started
    del result
    gc.collect()
    return elapsed


def _peak_mb(function: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        result = function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    gc.collect()
    return peak / 1e6


def _append_ms(root: Path, records: int = 5_000) -> float:
    """Milliseconds per appended record: a ~2 KB message record, written and flushed."""
    transcript = Transcript(root)
    content = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "output line\n" * 80}
        for i in range(2)
    ]
    fields = {"index": 3, "message": {"role": "user", "content": content}, "turn": 1, "epoch": 0}
    started = time.perf_counter()
    for _ in range(records):
        transcript.write("message", fields)
    elapsed = time.perf_counter() - started
    transcript.close()
    return elapsed / records * 1_000


def _row(figure: str, median: float, unit: str, target: str, met: bool) -> dict[str, Any]:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main(blocks: int = BLOCKS, runs: int = RUNS) -> list[dict[str, Any]]:
    """Run the benchmark; returns one row per figure (median over `runs` runs)."""
    engines: dict[str, Callable[[Path], Any]] = {
        "load_transcripts": ours,
        "DuckDB read_json, flattened to blocks": duckdb_flatten,
        "pyarrow.json.read_json (records only)": pyarrow_records,
        "orjson + Python flatten": orjson_flatten,
        "json.loads + json_normalize": baseline,
    }
    if importlib.util.find_spec("orjson") is None:  # a benchmark-only library
        del engines["orjson + Python flatten"]
    with tempfile.TemporaryDirectory(prefix="evo-bench-") as tmp:
        path = generate(Path(tmp) / "transcripts", blocks)
        megabytes = path.stat().st_size / 1e6
        loaded = ours(path)
        assert len(loaded.blocks) >= blocks, "the generated transcript is short of blocks"
        reference = duckdb_flatten(path)
        assert len(reference) >= len(loaded.blocks), "the reference flatten is short of blocks"
        del loaded, reference
        times: dict[str, list[float]] = {name: [] for name in engines}
        for _ in range(runs):  # interleaved, so every engine sees the same machine
            for name, engine in engines.items():
                times[name].append(_seconds(lambda engine=engine: engine(path)))
        medians = {name: statistics.median(values) for name, values in times.items()}
        events_t = statistics.median(_seconds(lambda: ours(path).events) for _ in range(runs))
        ours_mb, base_mb = _peak_mb(lambda: ours(path)), _peak_mb(lambda: baseline(path))
        append = statistics.median(_append_ms(Path(tmp) / f"append-{i}") for i in range(runs))
    ours_t = medians["load_transcripts"]
    flatten_ratio = ours_t / medians["DuckDB read_json, flattened to blocks"]
    speedup = medians["json.loads + json_normalize"] / ours_t
    rows = [
        _row(f"transcript size ({blocks:,} blocks)", megabytes, "MB", "-", True),
        _row(
            "load_transcripts",
            ours_t,
            "s",
            f"< {LOAD_SECONDS_TARGET:g} s",
            ours_t < LOAD_SECONDS_TARGET,
        ),
        _row("load_transcripts throughput", megabytes / ours_t, "MB/s", "-", True),
    ]
    for name, seconds in medians.items():
        if name != "load_transcripts":
            rows.append(_row(f"engine: {name}", seconds, "s", "-", True))
    rows += [
        _row(
            "load_transcripts / DuckDB like-for-like flatten",
            flatten_ratio,
            "x",
            f"<= {FLATTEN_RATIO_TARGET:g}x",
            flatten_ratio <= FLATTEN_RATIO_TARGET,
        ),
        _row(
            "speed-up over json.loads + json_normalize",
            speedup,
            "x",
            f">= {SPEEDUP_TARGET:g}x",
            speedup >= SPEEDUP_TARGET,
        ),
        _row("load_transcripts peak Python memory", ours_mb, "MB", "-", True),
        _row("baseline peak Python memory", base_mb, "MB", "-", True),
        _row("load + events frame (on demand)", events_t, "s", "-", True),
        _row("analysis package, lines of code (was 1,261)", _code_lines(), "lines", "-", True),
        _row(
            "Transcript.write per record (~2 KB)",
            append,
            "ms",
            f"< {APPEND_MS_TARGET:g} ms",
            append < APPEND_MS_TARGET,
        ),
    ]
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    width = max(len(row["figure"]) for row in rows)
    print(f"{'figure':<{width}}  {'median':>10}  {'unit':<5} {'target':<9} met")
    for row in rows:
        print(
            f"{row['figure']:<{width}}  {row['median']:>10.3f}  {row['unit']:<5} "
            f"{row['target']:<9} {'yes' if row['met'] else 'NO'}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=BLOCKS)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    print_table(main(args.blocks, args.runs))
