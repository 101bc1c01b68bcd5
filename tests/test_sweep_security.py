"""A sweep's doors and data, attacked: the Dask cluster the project starts, the results kept
under `out`, workers that cannot start.

The Dask tests start a real local cluster; the process-pool test runs a real script.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, write_session
from support.sweep_work import peek, square

from evo_magic import load_transcripts, replay
from evo_magic.analysis.engine import SweepWarning, Unit
from evo_magic.analysis.engine.cluster import start_cluster
from evo_magic.analysis.sweep import run_sweep
from evo_magic.strategies import ObservationMasking

KEY = "sk-ant-api03-sweepsecuritytestkey0123456789"
STRATEGIES = {"none": [], "masking-3": [ObservationMasking(3)]}


@pytest.mark.slow  # a Dask cluster
def test_the_project_s_cluster_refuses_a_client_without_its_credentials():
    from distributed import Client
    from distributed.security import Security

    with start_cluster(1) as cluster:
        assert cluster.address.startswith("tls://127.0.0.1:")
        assert cluster.client.submit(sum, [1, 2]).result(timeout=60) == 3
        attempts = [
            (cluster.address, Security.temporary()),  # TLS, but other credentials
            (cluster.address.replace("tls://", "tcp://"), None),  # plain TCP
        ]
        for address, security in attempts:
            with pytest.raises(OSError):  # Dask's CommClosedError: the scheduler hung up
                Client(address, security=security, timeout=5)


@pytest.mark.slow  # a Dask cluster
def test_a_sweep_s_workers_hold_no_credential(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MY_COPY", f"token={KEY}")  # a copy under another name counts too
    units = [Unit(str(n), {"n": n, "key": KEY}) for n in range(2)]
    result = run_sweep(units, peek, engine="dask", workers=2, progress=False)
    seen = result.frames["seen"]
    assert len(seen) == 2 and result.failures.empty
    assert list(seen["named"]) == ["", ""]
    assert not seen["in_initial"].any()
    assert seen["scheduler"].str.startswith("tls://").all()


def _corpus(root: Path, calls: dict[int, int]) -> Path:
    """Claude Code sessions under `root`, one per seed, with about `calls[seed]` calls each
    (written again over what was there: a session that grew)."""
    for seed, count in calls.items():
        project = write_session(root / f"made{seed}", calls=count, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        for path in project.rglob("*.jsonl"):
            target = root / "projects" / str(path.relative_to(project)).replace(SID, new_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(SID, new_id))
    return root / "projects"


def _same_totals(left: pd.DataFrame, right: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        left.reset_index(drop=True), right.reset_index(drop=True), check_dtype=False
    )


def _calls_of(result: object, session: str) -> int:
    calls = result.calls  # type: ignore[attr-defined]
    mine = calls[(calls["session_id"].astype(str) == session) & (calls["strategy"] == "none")]
    return len(mine)


@pytest.mark.parametrize("through_lake", [False, True])
def test_a_session_that_changed_is_replayed_again_when_the_sweep_resumes(
    tmp_path: Path, through_lake: bool
):
    sessions = _corpus(tmp_path / "corpus", {0: 5, 1: 6})
    grown = SID[:-4] + "0000"

    def source() -> object:
        lake = tmp_path / "lake"
        return load_transcripts(sessions, lake=lake) if through_lake else sessions

    out = tmp_path / "out"
    first = replay(source(), STRATEGIES, engine="local", workers=1, out=out, progress=False)
    before = _calls_of(first, grown)
    _corpus(tmp_path / "corpus", {0: 9})  # the session grows between the two runs
    resumed = replay(source(), STRATEGIES, engine="local", workers=1, out=out, progress=False)
    fresh = replay(source(), STRATEGIES, engine="local", workers=1, progress=False)
    assert _calls_of(fresh, grown) > before
    assert _calls_of(resumed, grown) == _calls_of(fresh, grown)
    _same_totals(resumed.totals, fresh.totals)


def test_a_truncated_result_under_out_is_replayed_again(tmp_path: Path):
    sessions = _corpus(tmp_path / "corpus", {0: 5, 1: 6})
    out = tmp_path / "out"
    replay(sessions, STRATEGIES, engine="local", workers=1, out=out, progress=False)
    kept = sorted((out / "calls").glob("*.parquet"))
    assert len(kept) == 2
    data = kept[0].read_bytes()
    kept[0].write_bytes(data[: len(data) // 2])  # a disk that filled, a copy cut short
    marker = sorted((out / "done").glob("*.json"))[1]
    marker.write_bytes(marker.read_bytes()[:10])
    resumed = replay(sessions, STRATEGIES, engine="local", workers=1, out=out, progress=False)
    fresh = replay(sessions, STRATEGIES, progress=False)
    assert resumed.failures.empty
    _same_totals(resumed.totals, fresh.totals)


SCRIPT = """
from evo_magic import replay

{indent}result = replay({folder!r}, {{"none": []}}, engine="local", workers=2, progress=False)
{indent}print("calls", int(result.totals["calls"].sum()))
"""


@pytest.mark.slow  # a script run by a subprocess, with its process pool
@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_the_main_guard_is_told_why_its_workers_cannot_start(
    tmp_path: Path, guarded: bool
):
    sessions = _corpus(tmp_path / "corpus", {0: 5, 1: 6})
    body = SCRIPT.format(indent="    " if guarded else "", folder=str(sessions))
    if guarded:
        body = body.replace("\n    result", '\nif __name__ == "__main__":\n    result', 1)
    script = tmp_path / "sweep.py"
    script.write_text(body)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    if guarded:
        assert done.returncode == 0, done.stderr
        assert int(done.stdout.split()[-1]) > 0
        return
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("evo_magic.analysis.engine.base.SweepError: the sweep's worker")
    assert "sweep.py" in last and 'if __name__ == "__main__":' in last and "workers=1" in last


def test_a_sweep_where_every_session_failed_says_so(tmp_path: Path):
    units = [Unit(f"s{n}", {"n": n, "fail": [0, 1, 2]}) for n in range(3)]
    with pytest.warns(SweepWarning, match="none of the 3 sessions of this sweep gave a result"):
        result = run_sweep(units, square, workers=1, out=tmp_path / "out", progress=False)
    assert list(result.failures["session_id"]) == ["s0", "s1", "s2"]


def test_a_result_replaced_by_a_link_is_not_followed(tmp_path: Path):
    out = tmp_path / "out"
    units = [Unit(f"s{n}", {"n": n}) for n in range(2)]
    run_sweep(units, square, workers=1, out=out, progress=False)
    planted = tmp_path / "planted.parquet"
    first, second = sorted((out / "one").glob("*.parquet"))
    planted.write_bytes(second.read_bytes())  # another session's result, readable
    first.unlink()
    first.symlink_to(planted)
    resumed = run_sweep(units, square, workers=1, out=out, progress=False)
    assert (resumed.ran, resumed.reused) == (1, 1)
    assert sorted(resumed.frames["one"]["n"]) == [0, 1]
    assert not first.is_symlink()  # written afresh, in place of the link
