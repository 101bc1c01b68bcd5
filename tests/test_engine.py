"""The engine is one value: replay, retention and the sweep take an `Engine` or its options as
keywords, refuse a bad option with the same line, and give the same numbers either way.

The engines are real: a pool of local worker processes and a local Dask cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import SID, write_session
from support.sweep_work import reader, square

from evo_magic import Engine, replay, retention
from evo_magic.analysis.engine import OPTIONS, EngineOptions, SweepError, Unit
from evo_magic.analysis.engine.cluster import LocalDaskCluster
from evo_magic.analysis.sweep import run_sweep
from evo_magic.models import FunctionModel
from evo_magic.strategies import ObservationMasking

STRATEGIES = {"none": [], "seed": None, "masking-3": [ObservationMasking(3)]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three small Claude Code sessions (each with a subagent)."""
    root = tmp_path_factory.mktemp("corpus")
    for seed in range(3):
        project = write_session(tmp_path_factory.mktemp(f"cc{seed}"), calls=12, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        for path in project.rglob("*.jsonl"):
            target = root / "projects" / str(path.relative_to(project)).replace(SID, new_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(SID, new_id))
    return root


BAD = [
    ({"engine": "spark"}, "engine must be one of 'local', 'dask', got 'spark'"),
    ({"engine": "local", "workers": 0}, "workers must be a positive whole number, got 0"),
    ({"engine": "dask", "workers": True}, "workers must be a positive whole number, got True"),
    ({"engine": "local", "client": "tcp://127.0.0.1:1"}, "client= is for engine='dask'"),
    ({"engine": "local", "out": 3}, "out must be a folder's path, got 3"),
    ({"engine": "local", "progress": "yes"}, "progress must be True or False, got 'yes'"),
    (
        {"engine": Engine("local"), "workers": 2},
        "engine= is an Engine: give workers= in it, not beside it",
    ),
]


def _refusal(call: Any) -> str:
    with pytest.raises(SweepError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize(("options", "message"), BAD)
def test_a_bad_engine_option_is_refused_alike_by_replay_retention_and_the_sweep(
    corpus: Path, tmp_path: Path, options: dict[str, Any], message: str
):
    given = "out" in options or isinstance(options["engine"], Engine)
    out = {} if given else {"out": tmp_path / "out"}
    users = {
        "replay": lambda: replay(corpus, STRATEGIES, **options, **out),
        "retention": lambda: retention(corpus, STRATEGIES, **options, **out),
        "sweep": lambda: run_sweep([Unit("a", {"n": 1})], square, **options, **out),
    }
    refused = {name: _refusal(call) for name, call in users.items()}
    assert refused == dict.fromkeys(users, message)  # one rule, one line, three users
    assert not (tmp_path / "out").exists()  # refused before anything ran
    if not isinstance(options["engine"], Engine):  # the value refuses it when it is made
        kind = options.pop("engine")
        assert _refusal(lambda: Engine(kind, **options)) == message


def test_an_option_that_is_no_engine_option_is_a_type_error(corpus: Path):
    with pytest.raises(TypeError, match="'wrkers'.*workers, client, out, progress"):
        replay(corpus, STRATEGIES, engine="local", wrkers=2)


def test_the_keywords_are_the_engine_s_options():
    assert set(EngineOptions.__annotations__) == set(OPTIONS)
    assert Engine(out="~/runs").out == Path("~/runs").expanduser()  # as every user reads it


def _same(left: pd.DataFrame, right: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        left.reset_index(drop=True), right.reset_index(drop=True), check_dtype=False
    )


@pytest.mark.slow  # a Dask cluster and process pools
def test_an_engine_value_gives_what_its_keywords_give(
    corpus: Path, tmp_path: Path, dask_cluster: LocalDaskCluster
):
    model = "claude-sonnet-4-5"
    client = dask_cluster.client
    on_dask = Engine("dask", workers=2, client=client, out=tmp_path / "value", progress=False)
    by_value = replay(corpus, STRATEGIES, model=model, engine=on_dask)
    by_keywords = replay(
        corpus,
        STRATEGIES,
        model=model,
        engine="dask",
        workers=2,
        client=client,
        out=tmp_path / "kw",
        progress=False,
    )
    whole = replay(corpus, STRATEGIES, model=model)
    assert by_value.failures is not None and by_value.failures.empty
    _same(by_value.totals, by_keywords.totals)
    _same(by_value.totals, whole.totals)
    assert len(list((tmp_path / "value" / "done").iterdir())) == 3  # its out= was used

    options = {
        "reader": FunctionModel(reader, name="claude-sonnet-4-5"),
        "model": model,
        "cache_dir": tmp_path / "cache",
    }
    local = Engine("local", workers=2, progress=False)
    kept = retention(corpus, STRATEGIES, engine=local, **options)
    kept_too = retention(corpus, STRATEGIES, engine="local", workers=2, progress=False, **options)
    assert kept.failures is not None and kept.failures.empty and len(kept.probes) > 0
    _same(kept.totals, kept_too.totals)

    units = [Unit(f"s{n}", {"n": n}) for n in range(4)]
    swept = run_sweep(units, square, engine=local)
    swept_too = run_sweep(units, square, engine="local", workers=2, progress=False)
    for name in ("rows", "one"):
        _same(swept.frames[name], swept_too.frames[name])


@pytest.mark.slow  # a sweep's process pool
def test_an_engine_is_one_value_to_keep_and_pass_on(corpus: Path, tmp_path: Path):
    """The same Engine, given again, resumes its sweep: what is done under `out` is read back."""
    runs = tmp_path / "runs"
    runs.mkdir()
    engine = Engine("local", workers=1, out=tmp_path / "out", progress=False)
    units = [Unit(f"s{n}", {"n": n, "runs": str(runs)}) for n in range(3)]
    first = run_sweep(units, square, engine=engine)
    again = engine.map(units, square)
    assert (first.ran, again.ran, again.reused) == (3, 0, 3)
    assert len(list(runs.iterdir())) == 3  # nothing ran twice
    _same(first.frames["one"], again.frames["one"])
