"""Experiments: tasks x strategies x replicates, each run isolated and checked, stored as it
finishes, resumed after an interrupt, on either engine; the built-in suite offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from support.experiment_checks import broken, dotted, half, wrote_hello

from evo_magic import Task, experiment, tasks
from evo_magic.analysis.engine import SweepError
from evo_magic.analysis.engine.cluster import LocalDaskCluster
from evo_magic.analysis.intervals import bootstrap_mean, wilson
from evo_magic.experiments.task import TaskError
from evo_magic.models import FunctionModel
from evo_magic.tools import sandbox_status

TESTS = Path(__file__).parent
KEEPS_FIRST = ["sliding-window(keep=8)"]
"""Over the limit, drops the middle of the history and keeps the first user message."""
CUTS_FIRST = ["summarise-older(keep=6)"]
"""Over the limit, summarises all but the newest messages (the offline summary's goal line is
the first user message cut to 300 characters)."""


@pytest.fixture
def template(tmp_path: Path) -> Path:
    folder = tmp_path / "template"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "data.txt").write_text("forty-two\n")
    return folder


def hello_task(template: Path, check=wrote_hello, **more) -> Task:
    return Task(
        name="hello",
        prompt="Write to `out.txt` the line `hello from the agent`.",
        workspace=template,
        check=check,
        max_turns=5,
        **more,
    )


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_each_run_works_in_its_own_copy_and_the_template_never_changes(
    template: Path, tmp_path: Path
):
    task = hello_task(template)
    before, digest = files_of(template), task.workspace_hash()
    x = experiment([task], {"a": "default", "b": []}, replicates=2, workers=1, out=tmp_path / "out")
    runs = x.runs
    assert len(runs) == 4 and runs["success"].all() and runs["error"].isna().all()
    assert files_of(template) == before and task.workspace_hash() == digest
    sessions = [Path(p) for p in runs["session"]]
    assert len(set(sessions)) == 4 and all((s / "session.jsonl").is_file() for s in sessions)
    copies = sorted((tmp_path / "out" / "work").glob("*/workspace"))
    assert len(copies) == 4  # one folder per run, none shared, none the template
    for copy in copies:
        assert (copy / "out.txt").read_text() == "hello from the agent\n"
        assert (copy / "src" / "data.txt").read_text() == "forty-two\n"
    record = json.loads((tmp_path / "out" / "experiment.json").read_text())
    assert record["tasks"][0]["workspace_sha256"] == digest
    assert record["seed"] == 0 and record["model"] == "offline" and record["evo_magic_version"]
    assert record["strategies"]["a"] == "default" and record["strategies"]["b"] == []


def test_runs_are_interleaved_by_strategy(template: Path, tmp_path: Path):
    labels = {"a": "default", "b": [], "c": ["micro"]}
    x = experiment([hello_task(template)], labels, replicates=3, workers=1, out=tmp_path / "o")
    order = list(zip(x.runs["replicate"], x.runs["strategy"], strict=True))
    for replicate in range(3):  # every block of one task and replicate holds each strategy once
        block = order[replicate * 3 : replicate * 3 + 3]
        assert {r for r, _ in block} == {replicate} and {s for _, s in block} == set(labels)


def test_a_check_command_runs_in_the_copy_with_its_output_kept(template: Path, tmp_path: Path):
    passing = hello_task(template, check="echo checking; grep -q hello out.txt")
    failing = Task("nope", "Run `true`.", template, check="echo looked; test -f missing.txt")
    x = experiment([passing, failing], {"seed": "default"}, replicates=1, workers=1,
                   out=tmp_path / "out")  # fmt: skip
    rows = x.runs.set_index("task")
    assert rows.loc["hello", "success"] and rows.loc["hello", "score"] == 1.0
    assert "checking" in rows.loc["hello", "check_output"]
    assert not rows.loc["nope", "success"] and rows.loc["nope", "error"] is None
    assert "looked" in rows.loc["nope", "check_output"]
    assert "[exit code: 1]" in rows.loc["nope", "check_output"]
    assert not (template / "out.txt").exists()


@pytest.mark.skipif(not sandbox_status().available, reason="bubblewrap is not usable here")
def test_a_check_command_is_sandboxed_as_the_agent_is(template: Path, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    task = hello_task(template, check=f"touch {outside}; grep -q hello out.txt")
    x = experiment([task], {"seed": "default"}, replicates=1, workers=1, out=tmp_path / "out")
    assert not outside.exists()  # the sandbox lets a check write in its copy only
    assert x.runs["success"][0]


def test_a_callable_check_gives_success_or_a_score(template: Path, tmp_path: Path):
    suite = [
        hello_task(template),
        Task("half", "Run `true`.", template, check=half),
        Task("broken", "Run `true`.", template, check=broken),
        Task("dotted", "Run `true`.", template, check=dotted),
    ]
    x = experiment(suite, {"seed": "default"}, replicates=1, workers=2, out=tmp_path / "out")
    rows = x.runs.set_index("task")
    assert rows.loc["hello", "success"] and rows.loc["hello", "score"] == 1.0
    assert not rows.loc["half", "success"] and rows.loc["half", "score"] == 0.5
    assert rows.loc["broken", "error"] == "check: RuntimeError: the check itself is broken"
    assert "not a bool or a score" in rows.loc["dotted", "error"]
    assert x.failed == 2 and x.done == 2 and x.left == 0


def test_a_check_that_times_out_is_an_error_row(template: Path, tmp_path: Path):
    task = hello_task(template, check="sleep 30", check_timeout=1)
    x = experiment([task], {"seed": "default"}, replicates=1, workers=1, out=tmp_path / "out")
    row = x.runs.iloc[0]
    assert not row["success"] and "timed out after 1 s" in row["error"]


def test_a_run_that_fails_is_a_row_and_the_others_go_on(template: Path, tmp_path: Path):
    def refuse(request):
        raise ConnectionError("the model is down")

    x = experiment(
        [hello_task(template)],
        {"seed": "default", "none": []},
        replicates=2,
        model=FunctionModel(refuse),
        workers=1,
        out=tmp_path / "out",
    )
    assert len(x.runs) == 4 and x.failed == 4
    assert all(e.startswith("agent: ") and "the model is down" in e for e in x.runs["error"])
    assert not x.runs["success"].any()
    summary = x.summary()
    assert list(summary["errors"]) == [2, 2] and list(summary["success_rate"]) == [0.0, 0.0]


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_max_cost_stops_starting_runs(template: Path, tmp_path: Path, workers: int):
    priced = {"prices": {"offline": {"input": 1000, "output": 1000}}}  # $ per million tokens
    task = hello_task(template)
    one = experiment([task], {"a": "default"}, replicates=1, workers=1, settings=priced,
                     out=tmp_path / "one")  # fmt: skip
    each = float(one.runs["cost_usd"][0])
    assert each > 0
    cap = 2.5 * each
    x = experiment([task], {"a": "default"}, replicates=6, workers=workers, settings=priced,
                   max_cost_usd=cap, out=tmp_path / "capped")  # fmt: skip
    # one worker: after two runs, a third (estimated at the mean run) would pass the cap;
    # two: two start at once, then one more in flight and the next would pass it
    assert len(x.runs) == 2 and x.left == 4 and x.stopped == "max_cost_usd"
    assert x.runs["cost_usd"].sum() <= cap
    assert "stopped (max_cost_usd)" in repr(x)


def test_the_same_call_resumes_and_other_settings_are_refused(template: Path, tmp_path: Path):
    out = tmp_path / "out"
    task = hello_task(template)
    first = experiment([task], {"a": "default"}, replicates=2, workers=1, out=out)
    markers = {p: p.stat().st_mtime_ns for p in (out / "done").iterdir()}
    again = experiment([task], {"a": "default"}, replicates=3, workers=1, out=out)
    assert again.reused == 2 and len(again.runs) == 3
    assert {p: p.stat().st_mtime_ns for p in markers} == markers  # nothing run twice
    assert again.runs.iloc[:2].equals(first.runs)
    with pytest.raises(SweepError, match="holds a sweep of other settings"):
        experiment([task], {"a": ["micro"]}, replicates=2, workers=1, out=out)


def test_bad_input_is_one_clear_line(template: Path, tmp_path: Path):
    task = hello_task(template)
    out = tmp_path / "out"
    cases = [
        (lambda: experiment([], {"a": "default"}, out=out), "non-empty list of Tasks"),
        (lambda: experiment([task, task], {"a": None}, out=out), "repeated: hello"),
        (lambda: experiment([task], {}, out=out), "at least one label"),
        (lambda: experiment([task], {"a": None}, replicates=0, out=out), "replicates must"),
        (lambda: experiment([task], {"a": None}, max_cost_usd=-1, out=out), "max_cost_usd"),
        (lambda: experiment([task], {"a": "nonesuch"}, out=out), "nonesuch"),
        (lambda: Task("a b", "x", template, "true"), "Task name"),
        (lambda: Task("t", "", template, "true"), "prompt"),
        (lambda: Task("t", "x", template / "missing", "true"), "is not a folder"),
        (lambda: Task("t", "x", template, "true", max_turns=0), "max_turns"),
        (lambda: Task("t", "x", template, check=3), "check must be"),  # type: ignore[arg-type]
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert words in str(info.value) and "\n" not in str(info.value)
    lambda_check = hello_task(template, check=lambda ws: True)
    with pytest.raises(TaskError, match="module-level function"):
        experiment([lambda_check], {"a": None}, workers=2, out=out)
    assert not (out / "done").exists() or not list((out / "done").iterdir())


def test_the_intervals():
    # Wilson's interval by its formula, for 0, 5 and 10 successes out of 10 (z = 1.959964)
    assert wilson(0, 10) == pytest.approx((0.0, 0.277532), abs=1e-6)
    assert wilson(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert wilson(10, 10) == pytest.approx((0.722468, 1.0), abs=1e-6)
    low, high = bootstrap_mean([1.0, 2.0, 3.0, 4.0], seed=1)
    assert 1.0 <= low < 2.5 < high <= 4.0
    assert bootstrap_mean([2.0, 2.0], seed=1) == (2.0, 2.0)


def test_offline_the_first_message_decides_the_constraint_task(tmp_path: Path):
    """A strategy that keeps the user's first message passes the constraint task; one whose
    summary cuts it fails, because the rule is stated after the first 300 characters and the
    offline summary's goal line keeps only those."""
    constraint = next(t for t in tasks.builtin() if t.name == "constraint")
    rule = "every file you write must end with the line `reviewed-by: data-team`"
    assert constraint.turns[0].index(rule) > 300
    x = experiment([constraint], {"keeps": KEEPS_FIRST, "cuts": CUTS_FIRST}, replicates=2,
                   workers=1, out=tmp_path / "out")  # fmt: skip
    runs = x.runs
    assert (runs["compactions"] >= 1).all()  # both compacted: the context passed the limit
    keeps, cuts = runs[runs["strategy"] == "keeps"], runs[runs["strategy"] == "cuts"]
    assert keeps["success"].all() and not cuts["success"].any()
    for row in runs.itertuples():
        folder = _folder(x, "constraint", row.strategy, row.replicate)
        text = (x.out / "work" / folder / "workspace" / "checked.txt").read_text()
        assert text.endswith("reviewed-by: data-team\n") == (row.strategy == "keeps")
    summary = x.summary().set_index("strategy")
    assert summary.loc["cuts", "diff_vs_first"] == -1.0 and summary.loc["cuts", "pairs"] == 2


def test_offline_every_builtin_task_compacts_under_the_seed_and_outcomes_differ(tmp_path: Path):
    suite = tasks.builtin()
    assert len(suite) >= 5
    x = experiment(suite, {"seed": "default", "none": []}, replicates=1, workers=1,
                   out=tmp_path / "out")  # fmt: skip
    seed = x.runs[x.runs["strategy"] == "seed"].set_index("task")
    assert (seed["compactions"] >= 1).all(), seed["compactions"]
    none = x.runs[x.runs["strategy"] == "none"].set_index("task")
    assert none["success"].all() and x.runs["error"].isna().all()
    # what the seed's pipeline loses offline, and why: the search output summarised away,
    # the first message cut, the long output sent to a file with a preview
    assert not seed.loc["find-value", "success"] and not seed.loc["rename-symbol", "success"]
    assert not seed.loc["constraint", "success"] and not seed.loc["long-output", "success"]
    assert seed.loc["fix-test", "success"]  # told exactly what to change: a control
    answer = x.out / "work" / _folder(x, "find-value", "seed") / "workspace" / "answer.txt"
    assert answer.read_text() == "I don't know.\n"
    assert len(x.transcripts.session_ids()) == len(x.runs)


def _folder(x, task: str, strategy: str, replicate: int = 0) -> str:
    found = sorted((x.out / "work").glob(f"{task}--{strategy}--r{replicate}--*"))
    assert len(found) == 1
    return found[0].name


def test_the_live_table_and_the_frontier(template: Path, tmp_path: Path):
    x = experiment([hello_task(template)], {"a": "default", "b": []}, replicates=2, workers=1,
                   out=tmp_path / "out")  # fmt: skip
    assert "4 of 4 runs done, 0 failed, 0 left; finished" in repr(x)
    assert "<table>" in x._repr_html_() and "rate so far" in x._repr_html_()
    figure = x.frontier()
    axes = figure.axes[0]
    assert axes.get_ylabel() == "Success rate" and len(axes.containers) == 2
    with pytest.raises(ValueError, match="x must be one of"):
        x.frontier(x="nonsense")


def test_agent_experiment_lists_the_kernels_experiments(ip, template: Path, tmp_path: Path):
    from evo_magic.notebook.experiments import ExperimentsTable

    experiment([hello_task(template)], {"a": "default"}, replicates=1, workers=1,
               out=tmp_path / "listed")  # fmt: skip
    shown = ip.run_line_magic("agent", "experiment")
    assert isinstance(shown, ExperimentsTable)
    assert str(tmp_path / "listed") in repr(shown) and "1 of 1 done" in repr(shown)


@pytest.mark.slow  # a process pool and a Dask cluster
def test_local_and_dask_engines_agree(tmp_path: Path, dask_cluster: LocalDaskCluster):
    suite = tasks.builtin()[:3]
    labels = {"seed": "default", "window": KEEPS_FIRST}
    # outputs name the run's folder (a traceback's path): two folders of one length
    local = experiment(suite, labels, replicates=1, engine="local", workers=2,
                       out=tmp_path / "local" / "out")  # fmt: skip
    dask = experiment(suite, labels, replicates=1, engine="dask", client=dask_cluster.client,
                      out=tmp_path / "dask_" / "out")  # fmt: skip
    same = ["task", "strategy", "replicate", "success", "score", "calls", "cost_usd",
            "peak_context_tokens", "compactions", "error"]  # fmt: skip
    pd.testing.assert_frame_equal(local.runs[same], dask.runs[same])
    pd.testing.assert_frame_equal(local.summary(), dask.summary())


REPLICATES = 2  # 20 runs: an interrupt after 3 still leaves most of them to resume
SCRIPT = f"""
import sys
from evo_magic import experiment, tasks

if __name__ == "__main__":
    experiment(tasks.builtin(), {{"seed": "default", "none": []}}, replicates={REPLICATES},
               workers=int(sys.argv[2]), out=sys.argv[1])
"""


@pytest.mark.slow  # a child process running an experiment, interrupted by a real signal
@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_experiment_resumes_without_running_anything_twice(
    tmp_path: Path, workers: int
):
    runs = len(tasks.builtin()) * 2 * REPLICATES
    out = tmp_path / "out"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    child = subprocess.Popen([sys.executable, str(script), str(out), str(workers)], env=env,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "done").glob("*.json"))) < 3:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, errors = child.communicate(timeout=120)
    assert child.returncode != 0 and "KeyboardInterrupt" in errors
    stored = {p: p.stat().st_mtime_ns for p in (out / "done").glob("*.json")}
    assert 3 <= len(stored) < runs
    for marker in stored:  # each stored run is whole: its row reads back
        assert (out / "runs" / f"{marker.stem}.parquet").is_file()
    x = experiment(tasks.builtin(), {"seed": "default", "none": []}, replicates=REPLICATES,
                   workers=2, out=out)  # fmt: skip
    assert x.reused == len(stored) and len(x.runs) == runs and x.left == 0
    assert {p: p.stat().st_mtime_ns for p in stored} == stored  # none of them ran again
    assert x.runs["error"].isna().all()
    assert len(list((out / "done").glob("*.json"))) == runs


@pytest.mark.slow  # a Jupyter kernel
def test_the_notebook_runs_the_builtin_suite_offline(tmp_path: Path):
    from test_notebook import executed_example

    nb = executed_example(TESTS.parent / "notebooks" / "experiment.ipynb", tmp_path)
    cells = {cell.source.splitlines()[-1]: cell.get("outputs", []) for cell in nb.cells
             if cell.cell_type == "code"}  # fmt: skip
    errors = [o for outputs in cells.values() for o in outputs if o["output_type"] == "error"]
    assert not errors, errors[0]["evalue"] if errors else ""
    live = [o for o in cells[next(k for k in cells if k.startswith("x = experiment"))]]
    assert any("40 of 40 runs done, 0 failed, 0 left; finished" in o["data"]["text/html"]
               for o in live if o["output_type"] == "display_data")  # fmt: skip
    summary = next(k for k in cells if k.startswith("x.summary()"))
    assert "success_low" in cells[summary][0]["data"]["text/html"]
    assert "image/png" in cells['x.frontier(x="calls")'][0]["data"]
    assert "window-8" in cells["r.totals"][0]["data"]["text/html"]
    assert "offline" in cells["%agent experiment"][0]["data"]["text/plain"]


def test_a_stored_row_that_is_not_its_run_s_is_refused(template: Path, tmp_path: Path):
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    task = hello_task(template)
    experiment([task], {"a": "default"}, replicates=2, workers=1, out=out)
    first, second = sorted((out / "runs").glob("*.parquet"))
    first.write_bytes(second.read_bytes())  # one run's file now holds another run's row
    with pytest.raises(TaskError, match="is not that run's row"):
        experiment([task], {"a": "default"}, replicates=2, workers=1, out=out)
    assert pq.read_table(second).num_rows == 1


def test_a_real_model_is_estimated_first_and_priced(claude, template: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture):  # fmt: skip
    """Through the real SDK against the loopback fake: the estimate is printed before any run,
    and the runs are priced from the catalog."""
    x = experiment([hello_task(template, check="true")], {"seed": "default"}, replicates=2,
                   model=claude, workers=1, out=tmp_path / "out")  # fmt: skip
    err = capsys.readouterr().err
    assert "experiment: 2 runs of claude-sonnet-5-5, at most about $" in err
    assert x.model == "claude-sonnet-5-5" and x.runs["error"].isna().all()
    assert (x.runs["cost_usd"] > 0).all() and (x.runs["calls"] >= 1).all()


def test_model_none_is_resolved_once_and_named_to_every_run(api, template: Path,
                                                           tmp_path: Path):  # fmt: skip
    """With a key, None is Claude, decided here and passed on by name: a worker without the
    key fails rather than fall back to the offline stand-in."""
    from evo_magic.models import default_model_name

    x = experiment([hello_task(template, check="true")], {"seed": "default"}, replicates=1,
                   workers=1, out=tmp_path / "out")  # fmt: skip
    assert x.model == default_model_name() != "offline"
    assert api.accepted and x.runs["error"].isna().all()
    assert json.loads((tmp_path / "out" / "experiment.json").read_text())["model"] == x.model
