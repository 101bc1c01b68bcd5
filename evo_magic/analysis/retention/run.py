"""`retention`: what each compaction strategy keeps and loses of a recorded session, measured
in the same replay pass that prices it, then (with a reader) probed one question at a time."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.engine import Engine, engine_of, split_options
from evo_magic.analysis.replay import StrategySpec
from evo_magic.analysis.retention.facts import Fact, as_fact
from evo_magic.analysis.retention.measure import Measure, measure
from evo_magic.analysis.retention.on_engine import measure_sessions
from evo_magic.analysis.retention.results import Retention, records
from evo_magic.analysis.retention.totals import assembled
from evo_magic.analysis.sources import is_lake, transcripts_of
from evo_magic.models import resolve_model
from evo_magic.models.base import Model

if TYPE_CHECKING:
    pass


def retention(
    source: Any,
    strategies: Mapping[str, StrategySpec],
    facts: Sequence[Fact | str] | None = None,
    reader: Model | str | None = None,
    replicates: int = 1,
    judge: Model | str | None = None,
    *,
    engine: Engine | str | None = None,
    **options: Any,
) -> Retention:
    """What each strategy setting keeps of the facts of `source`'s main conversations.

    `source` and `strategies` are what `replay` takes; the other keyword
    arguments go to `replay` (`model`, `policy`, `prices`, `cache`, `cache_dir`, ...), whose
    pass measures what is kept: `totals.cost_usd` is replay's cost of each setting. `facts`:
    None extracts them (instructions, paths, errors, identifiers; see
    `evo_magic.analysis.retention.facts`), else the given texts or `Fact`s, followed in every
    main conversation. With a `reader` (a Model or a model name), every fact with a question
    (given, or a cloze) is asked `replicates` times after each setting's final context, one
    question a request, graded by containment or by `judge`. Subagents are not followed.

    Many sessions: `engine` and its options (`workers`, `client`, `out`, `progress`) are
    replay's (an `Engine`, or its kind and options as keywords; explained on `Engine`): the
    sessions are measured one by one on the engine, each result kept under `out` as it
    finishes, with the same numbers as without an engine; a session that fails is a row of
    `failures`. Probes run on the workers, so a `reader` or `judge` object must pickle (a model
    name does; an object that does not is refused before the sweep starts). A lake is
    measured session by session, in this process without an engine.
    """
    engine_options, replay_options = split_options(options)
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    if "on_call" in replay_options:
        raise TypeError("retention observes the replay itself: on_call is not an option")
    chosen = engine_of(engine, engine_options, apart=is_lake(source))
    t = transcripts_of(source)
    spec = Measure(
        strategies=dict(strategies),
        given=None if facts is None else [as_fact(f) for f in facts],
        reader=None if reader is None else resolve_model(reader),
        judge=None if judge is None else resolve_model(judge),
        replicates=replicates,
        options=replay_options,
    )
    if chosen is None:
        frames, failures = measure(t, spec), None
    else:
        frames, failures = measure_sessions(t, spec, chosen)
    if spec.given is not None:
        _warn_unseen(records(frames["sent"]))
    return assembled(frames, spec, failures)


def _warn_unseen(sent: Sequence[Mapping[str, Any]]) -> None:
    """Say which given facts no conversation ever sent (a typo, or another session's fact)."""
    unseen = {row["text"] for row in sent if not row["sent"]}
    missing = sorted(unseen - {row["text"] for row in sent if row["sent"]})
    if missing:
        shown = ", ".join(repr(text[:60]) for text in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        warnings.warn(
            f"{len(missing)} given fact(s) appear in no context of the session: {shown}{more}",
            stacklevel=3,
        )
