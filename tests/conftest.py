"""The suite's fixtures, each defined once: a loopback fake of the Messages API (`fake`, and `api`
reached through the environment), a Claude model pointed at it, the sample project
(`workspace`) or an empty folder (`empty_workspace`), and a real IPython shell with the
extension loaded (`ip`). Their parts live in the `support` package.

Markers (registered in pyproject.toml) adjust a fixture for a test or a module:
`provokes_rejections` (its `fake` does not fail the test for requests it rejected),
`agent_config(name=value, ...)` (the `ip` shell's AgentMagics settings) and
`responder.with_args(function)` (how `api` answers).

`dask_cluster` is one Dask cluster for the whole run, for the tests that compare an engine's
numbers (starting one costs seconds, and they do not change it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic.demo import make_demo_workspace
from evo_magic.models import AnthropicModel

if TYPE_CHECKING:
    from evo_magic.analysis.engine.cluster import LocalDaskCluster


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many test processes `-n auto` (pyproject's addopts) starts: two for a run of the
    whole suite (its tests wait on kernels, clusters and child processes, so two keep two cores
    busy), one for a run of chosen files or tests (a second process costs more to start than it
    saves there)."""
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    return min(2, os.cpu_count() or 1) if whole else 0


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see a real key or endpoint: only the loopback fake is reachable."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeAnthropic]:
    """A started fake; at teardown it asserts that it rejected nothing (unless the test is
    marked `provokes_rejections`)."""
    with FakeAnthropic() as server:
        yield server
        if request.node.get_closest_marker("provokes_rejections") is None:
            server.assert_no_rejections()


@pytest.fixture
def claude(fake: FakeAnthropic) -> AnthropicModel:
    """A Claude model that talks to the fake through the real SDK."""
    return AnthropicModel("claude-sonnet-5-5", client=fake.client())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The sample project (`evo_magic.demo`), in a folder of its own."""
    return make_demo_workspace(tmp_path / "work")


@pytest.fixture
def empty_workspace(tmp_path: Path) -> Path:
    """An empty folder for a workspace, next to nothing else the test made yet."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[FakeAnthropic]:
    """The fake reached through ANTHROPIC_BASE_URL (with a key), answering like the offline
    model or as the test's `responder` marker says; it must reject nothing."""
    marker = request.node.get_closest_marker("responder")
    responder = marker.args[0] if marker is not None else offline_responder()
    with FakeAnthropic(responder) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-magics-0000")
        yield server
        server.assert_no_rejections()


@pytest.fixture
def ip(workspace: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """A real IPython shell with the extension loaded, working in the sample workspace, plain
    output, and the settings of the test's `agent_config` marker (one shell per process, as
    IPython keeps it)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    settings: dict[str, object] = {"display_mode": "plain"}
    if (marker := request.node.get_closest_marker("agent_config")) is not None:
        settings.update(marker.kwargs)
    shell = start_ipython() or InteractiveShell.instance()
    monkeypatch.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    for name, value in settings.items():
        shell.run_line_magic("config", f"AgentMagics.{name} = {value!r}")
    yield shell
    shell.run_line_magic("unload_ext", "evo_magic")
    shell.config.pop("AgentMagics", None)


@pytest.fixture(scope="session")
def dask_cluster() -> Iterator[LocalDaskCluster]:
    """A cluster of two workers started as `engine="dask"` starts its own (authenticated,
    without credentials), shared by the tests that compare the numbers a sweep gives on it:
    they pass its `client=` and leave it as it was. A test that kills a worker, or that is
    about the cluster a sweep starts and closes, starts its own (`engine="dask"` alone)."""
    from evo_magic.analysis.engine.cluster import start_cluster  # only where a test wants it

    with start_cluster(workers=2) as cluster:
        yield cluster
