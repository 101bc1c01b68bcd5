"""Retention: what each compaction strategy keeps and loses of a recorded session.

    from evo_magic import Fact, retention
    rt = retention(source, strategies={"none": [], "seed": None}, reader="offline")
    rt.facts, rt.kept, rt.calls, rt.totals, rt.frontier()

facts.py holds `Fact` and the extraction rules; conversations.py finds each main conversation's
facts and where each was first sent; kept.py follows which facts each call's context holds,
incrementally, as an observer of replay's own pass; measure.py is that pass (rows.py its rows);
probes.py asks and grades one question a request; on_engine.py measures session by session on
an `Engine`; totals.py computes the totals from the measured frames; results.py holds the frames
and the frontier; run.py the entry point.
"""

from __future__ import annotations

from evo_magic.analysis.retention.facts import Fact
from evo_magic.analysis.retention.results import Retention
from evo_magic.analysis.retention.run import retention

__all__ = ["Fact", "Retention", "retention"]
