"""Sweeps over many sessions: the same numbers on every engine, resumable, failures as rows.

The Dask tests start a real local cluster of two worker processes.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, write_session
from support.sweep_work import die_once, reader, square

from evo_magic import load_transcripts, replay, retention
from evo_magic.analysis.engine.cluster import LocalDaskCluster
from evo_magic.analysis.sweep import SweepError, Unit, run_sweep
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import FunctionModel
from evo_magic.session import Session
from evo_magic.strategies import ObservationMasking, SlidingWindow

STRATEGIES = {
    "recorded": "recorded",
    "none": [],
    "seed": None,
    "masking-3": [ObservationMasking(3)],
    "window": [SlidingWindow(keep=6)],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three Claude Code sessions (each with a subagent) and two evo_magic sessions."""
    root = tmp_path_factory.mktemp("corpus")
    for seed in range(3):
        project = write_session(tmp_path_factory.mktemp(f"cc{seed}"), calls=24, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        for path in project.rglob("*.jsonl"):
            target = root / "projects" / str(path.relative_to(project)).replace(SID, new_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(SID, new_id))
    from evo_magic.demo import make_demo_workspace

    for n in range(2):
        workspace = make_demo_workspace(tmp_path_factory.mktemp(f"evo{n}") / "work")
        policy = CompactPolicy(context_limit=6_000 + 2_000 * n)
        with Session(
            workspace, model="offline", policy=policy, transcripts_root=root / "evo"
        ) as session:
            session.ask("Survey this project: what does it do, and where are the TODOs?")
            session.ask("Now look again, carefully.")
    return root


def _same(left: pd.DataFrame, right: pd.DataFrame) -> None:
    """Equal frames, whatever order the sessions were gathered in and however a missing value
    is spelled (None, NaN, NA: Parquet and concatenation spell it differently)."""

    def plain(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.astype(object)
        frame = frame.where(frame.notna(), None)
        if "call" in frame.columns and "agent_id" in frame.columns:
            rank = {s: i for i, s in enumerate(dict.fromkeys(frame["strategy"]))}
            keyed = frame.assign(
                _rank=frame["strategy"].map(rank), _agent=frame["agent_id"].map(lambda a: a or "")
            )
            keyed = keyed.sort_values(["_rank", "session_id", "_agent", "call"], kind="stable")
            frame = keyed.drop(columns=["_rank", "_agent"])
        return frame.reset_index(drop=True)

    pd.testing.assert_frame_equal(plain(left), plain(right), check_dtype=False)


@pytest.mark.slow
def test_a_sweep_gives_the_numbers_of_one_replay_on_every_engine(
    corpus: Path, tmp_path: Path, dask_cluster: LocalDaskCluster
):
    whole = replay(corpus, STRATEGIES, model="claude-sonnet-4-5")
    assert whole.calls["session_id"].nunique() == 5
    local = replay(
        corpus, STRATEGIES, model="claude-sonnet-4-5", engine="local", workers=2, progress=False
    )
    dask = replay(
        corpus,
        STRATEGIES,
        model="claude-sonnet-4-5",
        engine="dask",
        client=dask_cluster.client,
        out=tmp_path / "sweep",
        progress=False,
    )
    for swept in (local, dask):
        assert swept.failures is not None and swept.failures.empty
        _same(swept.calls, whole.calls)
        _same(swept.totals, whole.totals)
        _same(swept.summaries, whole.summaries)
    # What the sweep wrote is one Parquet file per session and frame, under names that are
    # hashes, never the session ids themselves.
    written = sorted(p.relative_to(tmp_path / "sweep") for p in (tmp_path / "sweep").rglob("*"))
    assert len([p for p in written if p.parts[0] == "calls" and p.suffix == ".parquet"]) == 5
    assert not any(sid in str(p) for p in written for sid in whole.calls["session_id"].unique())


@pytest.mark.slow
def test_a_sweep_resumes_where_it_was_interrupted(tmp_path: Path):
    runs = tmp_path / "runs"
    runs.mkdir()
    payloads = [{"n": n, "runs": str(runs)} for n in range(8)]
    units = [Unit(f"session-{n}", p) for n, p in enumerate(payloads)]
    broken = [Unit(u.key, {**u.payload, "interrupt": 5}) for u in units]
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(broken, square, workers=1, out=out, settings="v1", progress=False)
    assert len(list(runs.iterdir())) == 6  # sessions 0-4 done, 5 interrupted
    resumed = run_sweep(units, square, workers=1, out=out, settings="v1", progress=False)
    assert (resumed.reused, resumed.ran) == (5, 3)
    assert len(list(runs.iterdir())) == 6 + 3  # nothing done twice
    fresh = run_sweep(units, square, workers=2, progress=False)
    for name in ("rows", "one"):
        _same(resumed.frames[name], fresh.frames[name])
    assert list(fresh.frames["one"]["n"]) == list(range(8))  # in the order of the sessions
    again = run_sweep(units, square, workers=2, out=out, settings="v1", progress=False)
    assert (again.reused, again.ran) == (8, 0)


@pytest.mark.slow
def test_results_of_other_settings_are_not_mixed(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    replay(corpus, {"none": []}, engine="local", workers=1, out=out, progress=False)
    with pytest.raises(SweepError, match="other settings"):
        replay(corpus, {"seed": None}, engine="local", workers=1, out=out, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_failing_session_is_a_row_and_the_sweep_goes_on(engine: str, tmp_path: Path):
    units = [Unit(f"s{n}", {"n": n, "fail": [2, 5]}) for n in range(7)]
    result = run_sweep(units, square, engine=engine, workers=2, progress=False)
    assert list(result.failures["session_id"]) == ["s2", "s5"]
    assert result.failures["error"].str.contains("ValueError: session 2 is broken").any()
    assert list(result.frames["one"]["n"]) == [0, 1, 3, 4, 6]


def test_a_failed_session_is_run_again_on_resume(tmp_path: Path):
    out = tmp_path / "out"
    units = [Unit(f"s{n}", {"n": n, "fail": [1]}) for n in range(3)]
    first = run_sweep(units, square, workers=1, out=out, progress=False)
    assert list(first.failures["session_id"]) == ["s1"]
    mended = [Unit(u.key, {"n": u.payload["n"]}) for u in units]
    second = run_sweep(mended, square, workers=1, out=out, progress=False)
    assert (second.reused, second.ran) == (2, 1) and second.failures.empty
    assert list(second.frames["one"]["n"]) == [0, 1, 2]


@pytest.mark.slow
def test_dask_retries_a_session_whose_worker_died(tmp_path: Path):
    units = [Unit(f"s{n}", {"n": n, "mark": str(tmp_path / "died")}) for n in range(4)]
    result = run_sweep(units, die_once, engine="dask", workers=2, progress=False)
    assert (tmp_path / "died").exists()  # the worker did die
    assert result.failures.empty
    assert list(result.frames["one"]["n"]) == [0, 1, 2, 3]


def test_session_ids_are_data_under_out(tmp_path: Path):
    out = tmp_path / "nested" / "out"
    units = [Unit("../../escape", {"n": 1}), Unit("/etc/passwd", {"n": 2})]
    result = run_sweep(units, square, workers=1, out=out, progress=False)
    assert list(result.frames["one"]["n"]) == [1, 2]
    outside = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out)}
    assert outside == {tmp_path / "nested"}


def test_progress_says_done_failed_and_left(tmp_path: Path, capsys: pytest.CaptureFixture):
    units = [Unit(f"s{n}", {"n": n, "fail": [3]}) for n in range(4)]
    run_sweep(units, square, workers=1)
    err = capsys.readouterr().err
    assert "sweep: 3 of 4 sessions done, 1 failed, 0 left" in err


def test_bad_arguments_are_clear_errors(tmp_path: Path):
    units = [Unit("a", {"n": 1})]
    with pytest.raises(SweepError, match="engine must be one of"):
        run_sweep(units, square, engine="spark")
    with pytest.raises(SweepError, match="workers"):
        run_sweep(units, square, workers=0)
    with pytest.raises(SweepError, match="ids repeat"):
        run_sweep(units * 2, square)
    with pytest.raises(SweepError, match="client= is for engine='dask'"):
        run_sweep(units, square, client="tcp://127.0.0.1:1")
    (tmp_path / "sweep.json").write_text("not json")
    with pytest.raises(SweepError, match="not a sweep manifest"):
        run_sweep(units, square, out=tmp_path)


@pytest.mark.slow
def test_a_partial_of_a_module_function_is_work(tmp_path: Path):
    units = [Unit(f"s{n}", {"n": n}) for n in range(3)]
    work = functools.partial(square)
    result = run_sweep(units, work, workers=2, progress=False)
    assert list(result.frames["one"]["n"]) == [0, 1, 2]
    shutil.rmtree(tmp_path, ignore_errors=True)


def _same_retention(left, right) -> None:
    """Equal retention results: every frame the same rows, whatever order the sessions came
    in (the totals, computed from them, equal as they are)."""
    for name in ("facts", "kept", "calls", "probes"):
        keys = [
            c
            for c in ("strategy", "session_id", "fact_id", "call", "replicate")
            if c in getattr(left, name).columns
        ]
        ordered = [
            getattr(side, name).astype(object).sort_values(keys, kind="stable")
            for side in (left, right)
        ]
        _same(*ordered)
    _same(left.totals, right.totals)


@pytest.mark.slow
def test_a_retention_sweep_gives_the_numbers_of_one_retention_on_every_engine(
    corpus: Path, tmp_path: Path, dask_cluster: LocalDaskCluster
):
    options = {
        "strategies": {"none": [], "seed": None, "masking-3": [ObservationMasking(3)]},
        "reader": FunctionModel(reader, name="claude-sonnet-4-5"),
        "model": "claude-sonnet-4-5",
        "cache_dir": tmp_path / "cache",
    }
    whole = retention(corpus, **options)
    assert whole.facts["session_id"].nunique() == 5 and len(whole.probes) > 0
    assert whole.totals["probe_cost_usd"].notna().all()  # the reader's calls are priced
    local = retention(corpus, engine="local", workers=2, progress=False, **options)
    on_dask = {"engine": "dask", "client": dask_cluster.client, "progress": False}
    dask = retention(corpus, out=tmp_path / "sweep", **on_dask, **options)
    lake = retention(load_transcripts(corpus, lake=tmp_path / "lake"), **options)
    for swept in (local, dask, lake):
        assert swept.failures is not None and swept.failures.empty
        _same_retention(swept, whole)
    # The offline reader goes to the workers too.
    offline = {**options, "reader": "offline"}
    _same_retention(
        retention(corpus, **on_dask, **offline),
        retention(corpus, **offline),
    )


def test_a_reader_that_cannot_go_to_the_workers_is_refused_before_the_sweep(
    corpus: Path, tmp_path: Path
):
    unsent = FunctionModel(lambda request: [{"type": "text", "text": "?"}], name="here")
    with pytest.raises(ValueError, match="the reader 'here' cannot be sent to the sweep's work"):
        retention(
            corpus,
            {"none": []},
            reader=unsent,
            engine="local",
            workers=2,
            out=tmp_path / "out",
            progress=False,
        )
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.slow
def test_an_interrupted_retention_sweep_resumes_where_it_stopped(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stop").touch()
    stopping = FunctionModel(functools.partial(reader, out=str(out), stop_after=2), name="r")
    options = {
        "strategies": {"none": [], "masking-3": [ObservationMasking(3)]},
        "model": "claude-sonnet-4-5",
        "cache_dir": tmp_path / "cache",
        "progress": False,
    }
    with pytest.raises(KeyboardInterrupt):
        retention(corpus, reader=stopping, engine="local", workers=1, out=out, **options)
    done = {p.name: p.stat().st_mtime_ns for p in (out / "done").iterdir()}
    assert len(done) == 2  # two sessions finished before the interrupt
    (out / "stop").unlink()
    resumed = retention(corpus, reader=stopping, engine="local", workers=1, out=out, **options)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "done").iterdir()}
    assert len(after) == 5
    assert all(after[name] == stamp for name, stamp in done.items())  # not run again
    del options["progress"]
    _same_retention(resumed, retention(corpus, reader=FunctionModel(reader, name="r"), **options))


@pytest.mark.slow  # a process pool whose worker dies
def test_a_local_worker_that_dies_fails_its_units_not_the_sweep(tmp_path: Path):
    units = [Unit(f"s{n}", {"n": n, "mark": str(tmp_path / "died")}) for n in range(20)]
    result = run_sweep(units, die_once, engine="local", workers=2, progress=False)
    assert (tmp_path / "died").exists()  # the worker did die: the pool is broken
    failed = set(result.failures["session_id"])
    finished = {f"s{n}" for n in result.frames["one"]["n"]} if "one" in result.frames else set()
    assert "s1" in failed and failed | finished == {unit.key for unit in units}
