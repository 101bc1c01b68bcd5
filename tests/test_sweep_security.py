"""A sweep's doors and data, attacked: the Dask cluster the project starts, the results kept
under `out`, workers that cannot start.

The Dask tests start a real local cluster; the process-pool test runs a real script.
"""

from __future__ import annotations

import pytest
from support.sweep_work import peek

from evo_magic.analysis.engine import Unit
from evo_magic.analysis.engine.cluster import start_cluster
from evo_magic.analysis.sweep import run_sweep

KEY = "sk-ant-api03-sweepsecuritytestkey0123456789"


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
