"""Transcripts kept in a lake: parsed once, updated incrementally, read in bounded memory.

    t = load_transcripts("~/.claude/projects", lake="~/evo-lake")   # builds or updates it
    t.calls; t.compactions; t.sessions        # small frames, in memory
    t.blocks                                  # large: read from the lake on use
    t.session("8f1c...")                      # one session's Transcripts
    t.sql("select model, sum(cost_usd) from calls group by 1")

A load builds the lake, or brings it up to date, reading only new or changed sessions
(`lake_build`); the lake is then opened here. Its groups of files, the sessions each holds
and the reads of their parts are its index (`lake_index`); the small frames (`calls`,
`compactions`) are read from one file of the whole lake, not thousands
(`lake_consolidated`).

File and session names are data: the lake's own files are named by hashes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.lake_build import NO_CALLS, LakeUpdate, Reader, update_lake
from evo_magic.analysis.lake_consolidated import CONSOLIDATED, consolidated
from evo_magic.analysis.lake_index import LakeIndex, to_frame
from evo_magic.analysis.lake_manifest import prices_mark, read_manifest

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LakeTranscripts", "LakeUpdate", "to_frame", "update_lake"]

Transcripts = Any
"""`evo_magic.analysis.transcripts.Transcripts`: given by the caller (it imports this module)."""
SESSION_FRAMES = ("blocks", "parts", "calls", "compactions")
"""The frames a session's Transcripts is made with (its `events` are read when asked for)."""


class LakeTranscripts:
    """The frames of a lake (see the module docstring), each read on first use and kept:
    `calls`, `compactions` and `sessions` are small; `blocks`, `parts` and `events` are
    large, and `session(id)` reads one session's rows only."""

    def __init__(
        self,
        lake: str | Path,
        make: Callable[..., Any],
        update: LakeUpdate | None = None,
        read: Reader | None = None,
        *,
        prices: Any = None,
    ):
        self.lake = Path(lake).expanduser()
        self.prices = prices
        """The prices the calls are shown at (`evo_magic.cost.price_table`'s argument): the
        lake's calls are priced again as they are read, so a session read under other prices
        (or an older catalog) shows the same costs as a fresh load."""
        self._make = make  # the Transcripts class
        manifest = read_manifest(self.lake)
        self.update = update or LakeUpdate(kept=len(manifest["groups"]))
        """What the load that opened the lake did (groups read, kept, dropped)."""
        self.index = LakeIndex.of(self.lake, manifest["groups"], read)
        """The lake's groups, the sessions each holds, and the reads of their parts (`read`
        reads a group whose part is damaged again; None: says it cannot)."""
        self._groups = self.index.groups  # the same dict: a group read again is seen by both
        self._cache: dict[str, pd.DataFrame] = {}
        self._generation = str(manifest.get("generation") or 0)

    @property
    def calls(self) -> pd.DataFrame:
        if "calls" not in self._cache:
            from evo_magic.analysis.call_costs import price_calls

            calls = self._frame("calls")
            mark = prices_mark(self.prices)
            if any(e.get("prices") not in (mark, NO_CALLS) for e in self._groups.values()):
                calls = price_calls(calls, self.prices)[0]  # priced at other prices: again
            self._cache["calls"] = calls
        return self._cache["calls"]

    @property
    def compactions(self) -> pd.DataFrame:
        return self._frame("compactions")

    @property
    def files(self) -> list[Path]:
        return [Path(name) for entry in self._groups.values() for name in entry["files"]]

    @property
    def skipped(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for entry in self._groups.values():
            for reason, count in (entry.get("skipped") or {}).items():
                total[reason] = total.get(reason, 0) + int(count)
        return total

    @property
    def sessions(self) -> pd.DataFrame:
        """One row per session: its source, calls, cost (NA when a call had no price), calls
        without a price or with partial usage, and the files it came from."""
        from evo_magic.analysis.call_costs import session_totals

        files = {
            session: sum(len(self._groups[key]["files"]) for key in keys)
            for session, keys in self.index.by_session.items()
        }
        return session_totals(self.calls, files)

    @property
    def blocks(self) -> pd.DataFrame:
        return self._frame("blocks")

    @property
    def parts(self) -> pd.DataFrame:
        return self._frame("parts")

    @property
    def events(self) -> pd.DataFrame:
        return self._frame("events")

    def session_ids(self) -> list[str]:
        return self.index.session_ids()

    def session(
        self, session_id: str, frames: dict[str, pd.DataFrame] | None = None
    ) -> Transcripts:
        """One session's Transcripts, read from its group's files in the lake; `frames`: its
        rows of `SESSION_FRAMES` when the caller read them already (`lake_sessions` cuts them
        out of a batch of sessions read at once). Its events are read when asked for."""
        keys = self.index.keys([session_id])
        if frames is None:
            frames = {name: self.index.read(name, keys, session_id) for name in SESSION_FRAMES}
        # Its events are read when asked for (their own fields may wait: `lake_events`).
        events = partial(self.index.read, "events", keys, session_id)
        return self._make(**frames, files=self.index.files(keys), skipped={}, _events_of=events)

    def sql(self, query: str) -> pd.DataFrame:
        """Run a DuckDB SQL query over the lake's frames (`blocks`, `parts`, `calls`,
        `compactions`, `events`); DuckDB reads only the files and columns it needs."""
        from evo_magic.analysis import lake

        if "events" in query.lower():
            self.index.complete(list(self._groups))
        con = lake.connect(self.lake)
        try:
            return con.sql(query).df()
        finally:
            con.close()

    def _frame(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            if name in CONSOLIDATED:
                self._cache[name] = self._consolidated(name)
            else:
                self._cache[name] = self.index.read(name, list(self._groups))
        return self._cache[name]

    def _consolidated(self, name: str) -> pd.DataFrame:
        """A small frame from the one file of the whole lake (see `lake_consolidated`)."""
        table = consolidated(
            self.lake,
            name,
            self._groups,
            self._generation,
            lambda keys: self.index.tables(name, keys),
        )
        return to_frame(name, table)

    def __repr__(self) -> str:
        u = self.update
        return (
            f"<LakeTranscripts at {self.lake}: {len(self.index.by_session):,} session(s), "
            f"{len(self.calls):,} calls; this load read {u.read} group(s), kept {u.kept}, "
            f"dropped {u.dropped}>"
        )
