"""The lake: transcripts parsed once into Parquet, updated incrementally, read in bounded memory."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, copy_session, write_session

from evo_magic import load_transcripts, replay
from evo_magic.analysis import lake_build, transcripts
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.lake_transcripts import LakeTranscripts
from evo_magic.analysis.transcripts import Transcripts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.session import Session
from evo_magic.strategies import ObservationMasking

SAMPLES = Path(__file__).parents[2] / "shared" / "claude-code-samples"
KEYS = ["source", "session_id", "agent_id", "seq", "file", "line"]


def _sessions(root: Path, tmp: Path, count: int) -> None:
    """`count` Claude Code sessions (each with a subagent's file) under `root/projects`."""
    for seed in range(count):
        project = write_session(tmp / f"cc{seed}", calls=16, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        copy_session(project, root / "projects", new_id)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _sessions(root, tmp_path / "made", 3)
    from evo_magic.demo import make_demo_workspace

    workspace = make_demo_workspace(tmp_path / "work")
    policy = CompactPolicy(context_limit=6_000)
    with Session(workspace, model="offline", policy=policy, transcripts_root=root / "evo") as s:
        s.ask("Survey this project: what does it do, and where are the TODOs?")
    if SAMPLES.is_dir():  # real files, the older layout (agent files beside the session's)
        shutil.copytree(SAMPLES / "JSSoundRecorder", root / "real")
    return root


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype(object)
    frame = frame.where(frame.notna(), None)
    keys = [k for k in KEYS if k in frame.columns]
    text = frame[keys].map(lambda v: "" if v is None else str(v))
    order = text.sort_values(keys, kind="stable").index
    return frame.loc[order].reset_index(drop=True)


def _same(left: pd.DataFrame, right: pd.DataFrame, *, any_order: bool = False) -> None:
    """Equal frames; `any_order`: of columns too (the events frame has a column per field its
    records have, in the order the files that were read together show them)."""
    if any_order:
        assert set(left.columns) == set(right.columns)
        right = right[list(left.columns)]
    assert list(left.columns) == list(right.columns)
    assert dict(left.dtypes.astype(str)) == dict(right.dtypes.astype(str))
    pd.testing.assert_frame_equal(_plain(left), _plain(right), check_dtype=False)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, lake_build.BATCH_BYTES])
def test_frames_over_a_lake_equal_frames_without_one(
    corpus: Path, tmp_path: Path, batch: int, monkeypatch: pytest.MonkeyPatch
):
    # Sessions are read in batches of files up to BATCH_BYTES; 1: each session on its own.
    monkeypatch.setattr(lake_build, "BATCH_BYTES", batch)
    whole = load_transcripts(corpus)
    t = load_transcripts(corpus, lake=tmp_path / "lake")
    assert isinstance(t, LakeTranscripts)
    for name in ("calls", "compactions", "blocks", "parts"):
        _same(getattr(t, name), getattr(whole, name))
    # Unchanged, the small frames come from one file of the whole lake, equal all the same.
    again = load_transcripts(corpus, lake=tmp_path / "lake")
    assert (tmp_path / "lake" / "_frames" / "calls.parquet").is_file()
    for name in ("calls", "compactions"):
        _same(getattr(again, name), getattr(whole, name))
    _same(t.events, whole.events, any_order=True)
    assert sorted(t.session_ids()) == sorted(whole.session_ids())
    one = whole.session_ids()[0]
    for name in ("calls", "blocks", "compactions"):
        _same(getattr(t.session(one), name), getattr(whole.session(one), name))
    by_sql = t.sql("select session_id, count(*) as n from calls group by 1 order by 1")
    counted = whole.calls.groupby("session_id", observed=True).size()
    assert dict(zip(by_sql["session_id"], by_sql["n"], strict=True)) == counted.to_dict()
    sessions = t.sessions.set_index("session_id")
    assert sessions["calls"].sum() == len(whole.calls)


def test_a_load_in_batches_gives_exactly_the_frames_of_one_read(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
):
    # Without a lake, files are read a batch of sessions at a time (bounded memory); the
    # frames are the same, row for row and column for column, as when all are read at once.
    whole = load_transcripts(corpus)
    assert len(transcripts._batches(whole.files)) == 1  # the corpus is smaller than a batch
    monkeypatch.setattr(transcripts, "BATCH_BYTES", 1)
    assert len(transcripts._batches(whole.files)) > 1
    batched = load_transcripts(corpus)
    for name in ("calls", "compactions", "blocks", "parts", "events"):
        pd.testing.assert_frame_equal(getattr(batched, name), getattr(whole, name))
    assert batched.skipped == whole.skipped and batched.files == whole.files


def test_what_a_load_keeps_of_a_batch_holds_no_memory_of_the_batch():
    # A batch's rows are slices of what its reading made; kept as they are, they would keep
    # all of it. Settled, they are copies of their own, equal, with categories encoded.
    import pyarrow as pa

    from evo_magic.analysis.frames import BLOCK_COLUMNS, to_pandas
    from evo_magic.analysis.memory import settle

    before = pa.total_allocated_bytes()
    made = pa.table(
        {
            "text": pa.array([f"{n:08d}" * 10_000 for n in range(300)], pa.large_string()),
            "role": pa.array(["user", "assistant", None] * 100, pa.large_string()),
            "line": pa.array(range(300), pa.int64()),
        }
    )
    rows = made.slice(10, 5)
    kept = settle(rows, categories=["role"])
    assert pa.types.is_dictionary(kept.schema.field("role").type)
    assert kept.column("role").to_pylist() == rows.column("role").to_pylist()
    assert kept.column("text").to_pylist() == rows.column("text").to_pylist()
    spec = {name: BLOCK_COLUMNS[name] for name in ("text", "role", "line")}
    pd.testing.assert_frame_equal(to_pandas(kept, spec), to_pandas(rows, spec))
    del made, rows
    assert pa.total_allocated_bytes() - before < 1 << 20  # the 24 MB made are gone


@pytest.mark.slow
def test_a_lake_reads_only_new_and_changed_sessions(corpus: Path, tmp_path: Path):
    lake = tmp_path / "lake"
    first = load_transcripts(corpus, lake=lake)
    groups = first.update.read
    assert groups == 4 + SAMPLES.is_dir() and first.update.kept == 0
    again = load_transcripts(corpus, lake=lake)
    assert (again.update.read, again.update.kept, again.update.dropped) == (0, groups, 0)
    # Appending to a session reads that session again (its subagent's file with it), only it.
    main = next((corpus / "projects").glob("*0001.jsonl"))
    lines = main.read_text().splitlines(keepends=True)
    main.write_text("".join(lines[:-3]))
    load_transcripts(corpus, lake=lake)
    main.write_text("".join(lines))
    appended = load_transcripts(corpus, lake=lake)
    assert appended.update.read == 1 and appended.update.kept == groups - 1
    assert str(main) in appended.update.files_read
    assert any("subagents" in f for f in appended.update.files_read)
    _same(appended.calls, load_transcripts(corpus).calls)
    # A new session is read; a removed one is dropped with its rows.
    _sessions(corpus / "more", tmp_path / "made-more", 1)
    added = load_transcripts(corpus, lake=lake)
    assert added.update.read == 1
    shutil.rmtree(corpus / "more")
    dropped = load_transcripts(corpus, lake=lake)
    assert dropped.update.dropped == 1
    _same(dropped.calls, load_transcripts(corpus).calls)
    _same(dropped.blocks, load_transcripts(corpus).blocks)


def test_the_small_frames_of_the_whole_lake_follow_every_change(corpus: Path, tmp_path: Path):
    # calls and compactions are kept as one file of the whole lake; after a change only the
    # changed sessions' rows are replaced in it, and it stays what a load without a lake gives.
    lake = tmp_path / "lake"
    assert len(load_transcripts(corpus, lake=lake).calls)
    assert (lake / "_frames" / "calls.parquet").is_file()
    projects = corpus / "projects"
    grown = next(projects.glob("*0001.jsonl"))
    grown.write_text(grown.read_text() + grown.read_text().splitlines(keepends=True)[-1])
    gone = next(projects.glob("*0002.jsonl"))
    gone.unlink()
    shutil.rmtree(gone.with_suffix(""))
    _sessions(tmp_path / "more", tmp_path / "made-more", 5)
    new = next((tmp_path / "more" / "projects").glob("*0004.jsonl"))
    shutil.copy(new, projects / new.name)
    shutil.copytree(new.with_suffix(""), projects / new.stem)
    updated = load_transcripts(corpus, lake=lake)
    whole = load_transcripts(corpus)
    again = load_transcripts(corpus, lake=lake)  # read back from the file of the whole lake
    for name in ("calls", "compactions"):
        _same(getattr(updated, name), getattr(whole, name))
        pd.testing.assert_frame_equal(getattr(again, name), getattr(updated, name))
    assert set(updated.calls["session_id"].astype(str)) == set(whole.session_ids())


def test_replay_over_a_lake_gives_the_numbers_of_one_replay(corpus: Path, tmp_path: Path):
    strategies = {"none": [], "seed": None, "masking-3": [ObservationMasking(3)]}
    whole = replay(corpus, strategies, model="claude-sonnet-4-5")
    t = load_transcripts(corpus, lake=tmp_path / "lake")
    swept = replay(t, strategies, model="claude-sonnet-4-5", progress=False)
    pd.testing.assert_frame_equal(swept.totals, whole.totals, check_dtype=False)


def test_a_lake_folder_is_checked(corpus: Path, tmp_path: Path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(TranscriptError, match="not empty and holds no lake manifest"):
        load_transcripts(corpus, lake=busy)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{")
    with pytest.raises(TranscriptError, match="not a lake manifest"):
        load_transcripts(corpus, lake=broken)
    assert (busy / "notes.txt").read_text() == "mine"


def test_a_manifest_naming_files_outside_the_lake_deletes_nothing(corpus: Path, tmp_path: Path):
    import json

    lake = tmp_path / "lake"
    load_transcripts(corpus, lake=lake)
    victim = tmp_path / "victim.parquet"
    victim.write_text("keep me")
    manifest = json.loads((lake / "manifest.json").read_text())
    key = next(iter(manifest["groups"]))
    manifest["groups"][key]["written"].append("../victim.parquet")
    manifest["groups"][key]["files"] = {}  # as if changed: its files are dropped and re-read
    (lake / "manifest.json").write_text(json.dumps(manifest))
    load_transcripts(corpus, lake=lake)
    assert victim.read_text() == "keep me"


def test_a_touched_file_is_not_read_again_and_a_rewritten_one_is(corpus: Path, tmp_path: Path):
    import os

    lake = tmp_path / "lake"
    load_transcripts(corpus, lake=lake)
    main = next((corpus / "projects").glob("*0001.jsonl"))
    os.utime(main, ns=(main.stat().st_atime_ns, main.stat().st_mtime_ns + 10**9))
    touched = load_transcripts(corpus, lake=lake)
    assert touched.update.read == 0  # the same size and head-and-tail hash: the same content
    text = main.read_text()
    main.write_text(text.replace('"Task 0:', '"Task X:', 1))  # same size, other content
    assert main.stat().st_size == len(text.encode())
    rewritten = load_transcripts(corpus, lake=lake)
    assert rewritten.update.read == 1 and str(main) in rewritten.update.files_read
    _same(rewritten.blocks, load_transcripts(corpus).blocks)


_OPENED: list[tuple[str, bool]] | None = None
"""While a list: every file this process opens (its path, and whether for writing)."""


def _record_opens(event: str, args: tuple) -> None:
    if _OPENED is None or event != "open":
        return
    name, mode, flags = args[0], args[1] or "", args[2] if len(args) > 2 else 0
    if isinstance(name, int):  # a descriptor the lake opened beneath its folder: its file
        name = os.readlink(f"/proc/self/fd/{name}")
    if isinstance(name, str | Path) and not os.path.isdir(name):
        writes = any(c in mode for c in "wax+") or bool(
            (flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        )
        _OPENED.append((str(name), writes))


sys.addaudithook(_record_opens)  # a hook cannot be removed: it records only while asked


def _opened_by(step: Callable[[], object]) -> list[tuple[str, bool]]:
    """The files `step` opened (paths as given to open: some relative to a folder of the
    lake), and whether for writing."""
    global _OPENED
    _OPENED = []
    try:
        step()
        return _OPENED
    finally:
        _OPENED = None


def test_an_unchanged_reload_opens_no_session_file_and_reads_only_what_is_asked(
    corpus: Path, tmp_path: Path
):
    lake = tmp_path / "lake"
    built = load_transcripts(corpus, lake=lake)
    len(built.calls)
    sources = {str(f) for f in corpus.rglob("*.jsonl")}
    t: list[LakeTranscripts] = []
    reload = _opened_by(lambda: t.append(load_transcripts(corpus, lake=lake)))
    assert t[0].update.read == 0
    assert not [name for name, _ in reload if name in sources]
    assert not [name for name, writes in reload if writes and not name.endswith(".lock")]
    calls = _opened_by(lambda: len(t[0].calls))
    assert [Path(name).name for name, _ in calls] == ["calls.parquet"]  # one file, the lake's
    assert not [name for name, writes in calls if writes]
    parts = [
        r for r in built.index.groups.values() for r in r["written"] if r.startswith("blocks/")
    ]
    blocks = _opened_by(lambda: len(t[0].blocks))
    assert sorted(Path(name).name for name, _ in blocks) == sorted(Path(p).name for p in parts)


def test_a_build_writes_the_small_frames_whole_file_from_the_rows_it_read(
    corpus: Path, tmp_path: Path
):
    lake = tmp_path / "lake"
    t: list[LakeTranscripts] = []
    build = _opened_by(lambda: t.append(load_transcripts(corpus, lake=lake)))
    # The build read no part back: the lake's calls file was made from the rows in memory.
    assert not _parts_read(build)
    calls = _opened_by(lambda: _same(t[0].calls, load_transcripts(corpus).calls))
    assert [Path(name).name for name, _ in calls if str(lake) in name or "/" not in name] == [
        "calls.parquet"
    ]
    _same(t[0].compactions, load_transcripts(corpus).compactions)
    # A grown session's build reads the other sessions' calls from the lake's file, not parts.
    grown = next((corpus / "projects").glob("*0001.jsonl"))
    grown.write_text(grown.read_text() + grown.read_text().splitlines(keepends=True)[-1])
    again: list[LakeTranscripts] = []
    update = _opened_by(lambda: again.append(load_transcripts(corpus, lake=lake)))
    assert again[0].update.read == 1
    assert not _parts_read(update)
    _same(again[0].calls, load_transcripts(corpus).calls)


def _parts_read(opened: list[tuple[str, bool]]) -> list[str]:
    """The parts (a group's own files) among the files opened for reading."""
    whole = {"calls.parquet", "compactions.parquet"}
    return [
        name
        for name, writes in opened
        if not writes and name.endswith(".parquet") and Path(name).name not in whole
    ]


def test_a_grown_session_rewrites_only_its_own_parts(corpus: Path, tmp_path: Path):
    lake = tmp_path / "lake"
    len(load_transcripts(corpus, lake=lake).calls)
    grown = next((corpus / "projects").glob("*0001.jsonl"))
    grown.write_text(grown.read_text() + grown.read_text().splitlines(keepends=True)[-1])
    t: list[LakeTranscripts] = []
    update = _opened_by(lambda: t.append(load_transcripts(corpus, lake=lake)))
    assert t[0].update.read == 1
    # Files are written as `.<name>.<pid>.<random>.tmp` beside their place, then renamed.
    tmp = re.compile(r"^\.(.+)\.\d+\.[0-9a-f]+\.tmp$")
    written = {tmp.sub(r"\1", Path(name).name) for name, writes in update if writes}
    entry = next(e for e in t[0].index.groups.values() if str(grown) in e["files"])
    whole_lake = {"manifest.json", ".lock", "calls.parquet", "compactions.parquet"}
    assert written - whole_lake == {Path(p).name for p in entry["written"]}
    read = {name for name, writes in update if not writes and name.endswith(".jsonl")}
    assert read <= {str(f) for f in entry["files"]}


def test_a_frame_without_rows_has_no_file_and_its_typed_view(corpus: Path, tmp_path: Path):
    shutil.rmtree(corpus / "evo")  # the generated sessions have no tool result of parts
    shutil.rmtree(corpus / "real", ignore_errors=True)
    lake = tmp_path / "lake"
    t = load_transcripts(corpus, lake=lake)
    whole = load_transcripts(corpus)
    assert len(whole.parts) == 0 and not list((lake / "parts").rglob("*.parquet"))
    _same(t.parts, whole.parts)
    assert t.sql("select count(*) as n from parts")["n"].tolist() == [0]


def _pricings(step: Callable[[], object]) -> int:
    """How many calls `step` priced (calls of `evo_magic.cost.usage_cost`)."""
    import evo_magic.cost

    code = evo_magic.cost.usage_cost.__code__
    priced = 0

    def count(frame, event, arg):  # noqa: ANN001, ANN202 (the profiler's signature)
        nonlocal priced
        if event == "call" and frame.f_code is code:
            priced += 1

    sys.setprofile(count)
    try:
        step()
    finally:
        sys.setprofile(None)
    return priced


def test_calls_priced_at_the_prices_asked_for_are_not_priced_again(corpus: Path, tmp_path: Path):
    lake = tmp_path / "lake"
    len(load_transcripts(corpus, lake=lake).calls)
    same = load_transcripts(corpus, lake=lake)
    assert _pricings(lambda: len(same.calls)) == 0
    whole = load_transcripts(corpus)
    _same(same.calls, whole.calls)
    # At other prices every call is priced again: the costs are those of a load at them.
    model = str(whole.calls.loc[whole.calls["cost_usd"] > 0, "model"].iloc[-1])
    dearer = {model: {"input": 100, "output": 500}}
    other = load_transcripts(corpus, lake=lake, prices=dearer)
    assert _pricings(lambda: len(other.calls)) > 0
    _same(other.calls, load_transcripts(corpus, prices=dearer).calls)
    assert other.calls["cost_usd"].sum() > same.calls["cost_usd"].sum()


def test_events_read_beside_the_records_are_those_of_the_records_read(tmp_path: Path):
    # The events' own fields are read from the JSON-lines files of the groups whose events are
    # asked for; a file the load skipped (in no known format) has no events, and its fields
    # must not become columns of the lake's events.
    root = tmp_path / "corpus"
    _sessions(root, tmp_path / "made", 2)
    (root / "projects" / "notes.jsonl").write_text('{"name": "x", "colour": "blue"}\n')
    with pytest.warns(TranscriptWarning, match="neither an evo_magic transcript"):
        whole = load_transcripts(root)
    with pytest.warns(TranscriptWarning, match="neither an evo_magic transcript"):
        t = load_transcripts(root, lake=tmp_path / "lake")
    assert "colour" not in t.events.columns
    _same(t.events, whole.events, any_order=True)


def _opens_of(step: Callable[[], object], names: set[str]) -> Counter[str]:
    """How many times `step` opened each of the files `names`."""
    return Counter(name for name, _ in _opened_by(step) if name in names)


def test_a_build_reads_each_file_once_and_the_events_fields_on_first_use(
    corpus: Path, tmp_path: Path
):
    # A load without a lake reads the events' own fields only when `events` is asked for; the
    # build did it for every batch, reading every file a second time.
    lake = tmp_path / "lake"
    sources = {str(f) for f in corpus.rglob("*.jsonl")}
    t: list[LakeTranscripts] = []
    built = _opens_of(lambda: t.append(load_transcripts(corpus, lake=lake)), sources)
    whole: list[Transcripts] = []
    plain = _opens_of(lambda: whole.append(load_transcripts(corpus)), sources)
    # Each file opened as a load opens it, and once more for its fingerprint (head and tail).
    assert built == {name: count + 1 for name, count in plain.items()}
    whole = whole[0]
    one = whole.session_ids()[0]
    files = {str(f) for f in whole.session(one).files}
    # A session cut out of the lake (what replay takes) reads no file for its events until
    # they are asked for; then only its own files are read for their fields.
    assert not _opens_of(lambda: len(t[0].session(one).blocks), sources)
    assert set(_opens_of(lambda: t[0].session(one).events, sources)) == files
    _same(t[0].session(one).events, whole.session(one).events, any_order=True)
    events: list[pd.DataFrame] = []
    rest = set(plain) - files  # the files a load reads (not its snapshots)
    assert set(_opens_of(lambda: events.append(t[0].events), sources)) == rest
    _same(events[0], whole.events, any_order=True)
    # Kept in the lake: a reload's events open no session file.
    again = load_transcripts(corpus, lake=lake)
    assert not _opens_of(lambda: again.events, sources)
    _same(again.events, whole.events, any_order=True)
    assert not any(e.get("events_pending") for e in again.index.groups.values())


def test_events_of_a_file_gone_since_the_build_say_their_fields_are_lost(
    corpus: Path, tmp_path: Path
):
    # The build keeps each record's identity and reads its own fields on first use: a file
    # removed in between cannot give them, and the user is told which, not given less silently.
    t = load_transcripts(corpus, lake=tmp_path / "lake")
    one = t.session_ids()[0]
    gone = sorted(load_transcripts(corpus).session(one).files)[0]
    Path(gone).unlink()
    with pytest.warns(TranscriptWarning, match=re.escape(f"{gone}: the file is gone")):
        events = t.session(one).events
    assert len(events) > 0  # the identities are kept


def test_a_build_of_many_batches_warns_once_as_a_load_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A build prices batch by batch; it warned once per batch (28 times at 100 MB of real
    # sessions, each with another count), where a load warns once with the total.
    import warnings

    folder = tmp_path / "real"
    shutil.copytree(Path(__file__).parent / "fixtures" / "real" / "claude-code-2.1", folder)
    monkeypatch.setattr(lake_build, "BATCH_BYTES", 1)  # a batch per session

    def said(**lake: Path) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load_transcripts(folder, **lake)
        return [str(w.message) for w in caught if issubclass(w.category, TranscriptWarning)]

    plain = said()
    assert any("usage_partial" in message for message in plain)
    assert said(lake=tmp_path / "lake") == plain


def test_events_whole_but_still_marked_waiting_are_kept_as_they_are(corpus: Path, tmp_path: Path):
    # A read of the events interrupted after a part was written whole, before the manifest
    # said so: the part's own mark is gone, so it is kept, not given its fields twice.
    import json

    lake = tmp_path / "lake"
    len(load_transcripts(corpus, lake=lake).events)
    manifest = json.loads((lake / "manifest.json").read_text())
    for entry in manifest["groups"].values():
        entry["events_pending"] = True
    (lake / "manifest.json").write_text(json.dumps(manifest))
    sources = {str(f) for f in corpus.rglob("*.jsonl")}
    t = load_transcripts(corpus, lake=lake)
    assert not _opens_of(lambda: t.events, sources)
    _same(t.events, load_transcripts(corpus).events, any_order=True)


def test_sql_over_a_lakes_events_has_their_own_fields(corpus: Path, tmp_path: Path):
    # The events of a lake just built wait for their own fields: a query reads them first.
    from evo_magic import sql

    own = set(load_transcripts(corpus).events.columns)
    t = load_transcripts(corpus, lake=tmp_path / "lake")
    assert own <= set(t.sql("select * from events").columns)
    load_transcripts(corpus, lake=tmp_path / "other")
    assert own <= set(sql("select * from events", tmp_path / "other").columns)


def test_the_files_a_build_writes_per_session_do_not_grow_with_the_folder(tmp_path: Path):
    # Each session's parts are written once, whatever else the folder holds: the build's
    # writes are linear in the sessions (the manifest and the lock aside).
    def writes(count: int) -> int:
        root = tmp_path / f"corpus{count}"
        _sessions(root, tmp_path / f"made{count}", count)
        lake = tmp_path / f"lake{count}"
        opened = _opened_by(lambda: load_transcripts(root, lake=lake))
        names = [Path(name).name for name, writes in opened if writes]
        # The manifest, the lock and the whole lake's small frames: written once a build.
        whole_lake = ("manifest", ".lock", "_frames", "calls.parquet", "compactions.parquet")
        return len([n for n in names if not any(mark in n for mark in whole_lake)])

    assert writes(4) == 2 * writes(2) > 0


def test_a_lake_written_under_other_columns_is_read_again(corpus: Path, tmp_path: Path):
    # A lake an earlier evo_magic wrote: its calls parts lack a column the frames now have
    # (turn_note came in 0.3), and its manifest holds no mark of the columns.
    import json

    import pyarrow.parquet as pq

    lake = tmp_path / "lake"
    load_transcripts(corpus, lake=lake)
    manifest = json.loads((lake / "manifest.json").read_text())
    del manifest["columns"]
    (lake / "manifest.json").write_text(json.dumps(manifest))
    for part in lake.rglob("*.parquet"):
        table = pq.read_table(part)
        if "turn_note" in table.column_names:
            pq.write_table(table.drop_columns(["turn_note"]), part)
    with pytest.warns(TranscriptWarning, match="other columns: every session is read again"):
        t = load_transcripts(corpus, lake=lake)
    assert t.update.read == len(manifest["groups"]) and t.update.kept == 0
    _same(t.calls, load_transcripts(corpus).calls)
    # Read again, the lake is current: the next load keeps every session.
    again = load_transcripts(corpus, lake=lake)
    assert again.update.read == 0 and "turn_note" in again.calls.columns
