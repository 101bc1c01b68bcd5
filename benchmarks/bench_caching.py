"""Benchmark: what prompt caching saves on one agent session, and what cache-aware
micro-compaction adds.

One 40-call session under the default pipeline (large outputs to files, micro-compaction before
every call, a summary over the limit), offline: a real `Session` talks through the real
`anthropic` SDK to the loopback fake of the Messages API (tests/support/fake_api), which validates
every request and emulates the prompt cache on its own clock (the model "thinks" 20 seconds a
call). The scripted model reviews a project: each call it says a sentence or two and, in a
cycle of three, reads 60 lines of a module (about 3,500 characters), reads its settings (300
to 900), or writes a note (a one-line result), then answers at call 40. The same session runs
three times:

- caching off: no breakpoint, every prompt token billed at the input rate (the default
  pipeline then clears as the seed does: there is no cache to weigh);
- caching on (the defaults: 5-minute TTL, cache-aware micro-compaction): tools, system prompt
  and conversation cached, old tool results cleared only when that pays for the cache write;
- caching on with the seed's eager micro-compaction (`MicroCompact(cache_aware=False)`): the
  same requests as caching off, billed with the cache.

Then observation masking (the paper's `ObservationMasking(10)`, alone, caching on) three ways:
no masking at all, eager masking (one more result masked before every call, the paper's
rule), and cache-aware masking (`cache_aware=True`: results due wait until masking them pays
for the cache write, and over the limit are masked at once). The target: cache-aware masking
costs less than eager masking. Without masking the context is not kept under the limit.

Costs are the session's own accounting (`Session.cost_usd`, the shipped prices of
claude-sonnet-5-5), i.e. the price table applied to the usage the fake reported. The cache-read
share is cache-read tokens over context tokens; the mean context is what a call sent (the
price of waiting: old tool output stays longer). The target: the default with caching on costs
at most 35% of caching off. The benchmark checks that caching off and the eager run sent the
same requests (caching changes how they are billed, not what they say).

The figures are exact, not timings: the fake is deterministic.

    python -m benchmarks.bench_caching            # prints the sessions, by kind of token

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the loopback fake lives with the tests

from support.fake_api import FakeAnthropic, Reply, text, tool_use, unmarked  # noqa: E402

from evo_magic.compact.policy import CompactPolicy  # noqa: E402
from evo_magic.cost import call_cost  # noqa: E402
from evo_magic.events import CompactionFinished, MicroCompacted, ModelResponded  # noqa: E402
from evo_magic.models import AnthropicModel  # noqa: E402
from evo_magic.prompt_cache import CacheSettings  # noqa: E402
from evo_magic.session import Session  # noqa: E402
from evo_magic.strategies import MicroCompact, ObservationMasking, default_pipeline  # noqa: E402
from evo_magic.usage import Usage  # noqa: E402

MODEL = "claude-sonnet-5-5"
CALLS = 40
SECONDS_PER_CALL = 20.0
RATIO_TARGET = 35.0  # % of the cost with caching off
SUMMARY_LIMIT = 15_000
"""Characters: the limit of the runs that compare summaries (full compactions happen)."""
TASK = (
    "Review the modules of this inventory service one by one: read each module and its "
    "settings, write a short note per module under notes/, and tell me at the end what each "
    "module does and which setting limits the batch size."
)


@dataclass
class Run:
    """One session's figures."""

    label: str
    cost_usd: float
    calls: int
    usage: Usage
    parts: dict[str, float]
    """USD by kind of token: input (uncached), output, cache_read, cache_write."""
    invalidated_tokens: int
    clearings: int
    mean_context_tokens: float
    full_compactions: int
    sent: list[list[dict[str, Any]]]
    summaries_usd: float

    @property
    def read_share(self) -> float:
        return 100 * self.usage.cache_read_input_tokens / self.usage.context_tokens


MODULES = 13
THOUGHTS = (
    "The last output shows how the batches are filtered; before changing anything I want to "
    "see where the items come from and which of the helpers the service calls first. ",
    "That settles the order of the steps. I will note it down so the summary at the end can "
    "cite it, then move on to the next module, which the README lists as the storage layer. ",
    "Nothing surprising here, but the configuration decides how large a batch may get, and "
    "that limit is what the failing report was about, so the setting deserves a look. ",
)


def module_text(n: int) -> str:
    """A module of the sample project: 60 to 200 lines, different for every n."""
    lines = [f'"""Module {n}: part of the inventory service."""', ""]
    for i in range(60 + (n * 37) % 141):
        lines.append(f"def step_{n}_{i}(items):  # keeps batch {n} item {i}")
        lines.append(f"    return [item for item in items if item.batch == {n * 1000 + i}]")
    return "\n".join(lines) + "\n"


def config_text(n: int) -> str:
    """A small settings file: 10 to 30 lines."""
    rows = [f"batch_limit_{n}_{i} = {(n * 131 + i * 17) % 997}" for i in range(10 + n % 21)]
    return "\n".join(rows) + "\n"


def make_project(root: Path) -> Path:
    workspace = root / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "config").mkdir()
    for n in range(1, MODULES + 1):
        (workspace / "src" / f"module_{n:02d}.py").write_text(module_text(n))
        (workspace / "config" / f"module_{n:02d}.toml").write_text(config_text(n))
    return workspace


def step(call: int) -> list[dict]:
    """The model's reply at agent call ``call`` (1-based): a thought and one tool call, in a
    cycle of three: read a module (60 lines, about 3,500 characters out), read its settings
    (300 to 900 characters out), write a note (a one-line result; the note is in the input)."""
    n = (call - 1) // 3 + 1
    thought = text(f"Step {call}. " + THOUGHTS[call % 3])
    ids = f"toolu_bench_{call:03d}"
    if call % 3 == 1:
        offset = 1 + (call * 7) % 40
        read = {"path": f"src/module_{n:02d}.py", "offset": offset, "limit": 60}
        return [thought, tool_use("read_file", read, id=ids)]
    if call % 3 == 2:
        return [thought, tool_use("read_file", {"path": f"config/module_{n:02d}.toml"}, id=ids)]
    note = (
        f"module {n}: filters items by batch; its settings cap a batch; checked at step {call}.\n"
    )
    write = {"path": f"notes/module_{n:02d}.md", "content": note * 4}
    return [thought, tool_use("write_file", write, id=ids)]


def responder(fake: FakeAnthropic) -> Any:
    """The agent's replies by call (see `step`), the answer at the last call; a summary
    request (no tools) gets a summary. Each call moves the fake's clock on."""
    calls = 0

    def respond(body: dict) -> Reply:
        nonlocal calls
        fake.clock.advance(SECONDS_PER_CALL)
        if not body.get("tools") or body.get("tool_choice") == {"type": "none"}:
            return Reply([text("Summary: the modules read so far filter items by batch.")])
        calls += 1
        if calls >= CALLS:
            return Reply([text(f"Done: {MODULES} modules, each filters items by batch.")])
        return Reply(step(calls), stop_reason="tool_use")

    return respond


def run(
    label: str,
    cache: CacheSettings,
    policy: CompactPolicy | None = None,
    strategies: list[Any] | None = None,
    **micro: Any,
) -> Run:
    """The scripted session under ``policy``, with ``strategies`` or the default pipeline
    whose micro-compaction is given ``micro``."""
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        fake.responder = responder(fake)
        workspace = make_project(Path(tmp))
        if strategies is None:
            strategies = default_pipeline()
            assert isinstance(strategies[1], MicroCompact)
            strategies[1] = replace(strategies[1], **micro)
        model = AnthropicModel(MODEL, client=fake.client())
        events: list[Any] = []
        with Session(
            workspace,
            model=model,
            cache=cache,
            policy=policy,
            strategies=strategies,
            max_turns=CALLS,
            transcripts_root=Path(tmp) / "transcripts",
        ) as session:
            session.subscribe(events.append)
            result = session.ask(TASK)
            fake.assert_no_rejections()
            assert result.turns == CALLS, result.turns
            cost = session.cost_usd
        assert cost is not None
        sent = [unmarked(body["messages"]) for body in fake.accepted if body.get("tools")]
    calls = [e for e in events if isinstance(e, ModelResponded)]
    micro_events = [e for e in events if isinstance(e, MicroCompacted)]
    return Run(
        label,
        cost,
        len(calls),
        sum((e.usage for e in calls), Usage()),
        cost_parts([e.usage for e in calls]),
        sum(e.cache_invalidated_tokens for e in micro_events),
        len(micro_events),
        sum(e.usage.context_tokens for e in calls) / len(calls),
        sum(isinstance(e, CompactionFinished) and e.success for e in events),
        sent,
        sum(e.summary_cost_usd or 0.0 for e in events if isinstance(e, CompactionFinished)),
    )


def cost_parts(usages: list[Usage]) -> dict[str, float]:
    parts = dict.fromkeys(("input", "output", "cache_read", "cache_write"), 0.0)
    for usage in usages:
        cost = call_cost(usage, MODEL)
        assert cost is not None
        parts["input"] += cost.input
        parts["output"] += cost.output
        parts["cache_read"] += cost.cache_read
        parts["cache_write"] += cost.cache_write
    return parts


def runs() -> tuple[Run, Run, Run]:
    off = run("caching off", CacheSettings(enabled=False))
    on = run("caching on (default)", CacheSettings())
    eager = run("caching on, eager clearing", CacheSettings(), cache_aware=False)
    # Caching changes how requests are billed, not what they say.
    assert off.sent == eager.sent, "caching on and off sent different requests"
    return off, on, eager


def summary_runs() -> tuple[Run, Run]:
    """The session under a limit low enough for full compactions, its summaries asked with
    the conversation as text (the seed's) and in the conversation itself."""
    limit = CompactPolicy(context_limit=SUMMARY_LIMIT)
    as_text = run("summaries as text", CacheSettings(), limit)
    in_context = run(
        "summaries in context", CacheSettings(), limit.with_changes(summary_in_context=True)
    )
    assert as_text.full_compactions == in_context.full_compactions > 0
    return as_text, in_context


def masking_runs() -> tuple[Run, Run, Run]:
    """The session with no compaction, eager observation masking, cache-aware masking."""
    none = run("no masking", CacheSettings(), strategies=[])
    eager = run("masking, eager", CacheSettings(), strategies=[ObservationMasking(10)])
    aware = run(
        "masking, cache-aware",
        CacheSettings(),
        strategies=[ObservationMasking(10, cache_aware=True)],
    )
    return none, eager, aware


def _row(figure: str, median: float, unit: str, target: str = "-", met: bool = True) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main() -> list[dict]:
    off, on, eager = runs()
    rows = []
    for r in (off, on, eager):
        rows += [
            _row(f"{r.label}: total cost of {r.calls} calls", r.cost_usd, "USD"),
            _row(f"  {r.label}: cache-read share of context tokens", r.read_share, "%"),
            _row(f"  {r.label}: cost per call", r.cost_usd / r.calls * 1e3, "mUSD"),
            _row(f"  {r.label}: mean context per call", r.mean_context_tokens, "tokens"),
        ]
    ratio = 100 * on.cost_usd / off.cost_usd
    target = f"<= {RATIO_TARGET:.0f}%"
    rows.append(_row("caching on (default) vs off", ratio, "%", target, ratio <= RATIO_TARGET))
    rows.append(
        _row("  eager clearing, caching on vs off", 100 * eager.cost_usd / off.cost_usd, "%")
    )
    rows.append(
        _row("  default vs eager clearing, caching on", 100 * on.cost_usd / eager.cost_usd, "%")
    )
    as_text, in_context = summary_runs()
    for r in (as_text, in_context):
        per = r.summaries_usd / r.full_compactions * 1e3
        rows.append(_row(f"{r.label}: cost of a compaction's summary", per, "mUSD"))
        rows.append(_row(f"  {r.label}: total cost of the session", r.cost_usd, "USD"))
    share = 100 * in_context.summaries_usd / as_text.summaries_usd
    rows.append(_row("summaries in context vs as text", share, "%"))
    none, eager_masking, aware = masking_runs()
    for r in (none, eager_masking, aware):
        rows += [
            _row(f"{r.label}: total cost of {r.calls} calls", r.cost_usd, "USD"),
            _row(f"  {r.label}: maskings", r.clearings, "count"),
            _row(f"  {r.label}: mean context per call", r.mean_context_tokens, "tokens"),
        ]
    versus = 100 * aware.cost_usd / eager_masking.cost_usd
    rows.append(_row("cache-aware vs eager masking", versus, "%", "< 100%", versus < 100))
    rows.append(_row("  cache-aware masking vs none", 100 * aware.cost_usd / none.cost_usd, "%"))
    rows.append(_row("  eager masking vs none", 100 * eager_masking.cost_usd / none.cost_usd, "%"))
    return rows


def describe(r: Run) -> str:
    parts = ", ".join(f"{name} ${value:.4f}" for name, value in r.parts.items())
    return (
        f"{r.label:<27} ${r.cost_usd:.4f} ({parts}); read {r.read_share:.1f}%; "
        f"{r.clearings} clearings invalidating {r.invalidated_tokens:,} cached tokens; "
        f"{r.full_compactions} full compactions (summaries ${r.summaries_usd:.4f}); "
        f"mean context {r.mean_context_tokens:,.0f} tokens"
    )


if __name__ == "__main__":
    for r in (*runs(), *summary_runs(), *masking_runs()):
        print(describe(r))
