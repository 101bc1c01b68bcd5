"""The Dask cluster the project starts for a sweep (or any other work on engine="dask"): one
function, `start_cluster`, that every user of a local cluster calls.

Such a cluster is a door into this machine for as long as it runs: whoever can reach its
scheduler runs code in its workers. So it opens only to the client made with it and holds
nothing worth taking:

- it speaks TLS with temporary credentials made here, for this cluster alone (mutual TLS: a
  client without them cannot connect, let alone run anything);
- its scheduler, nannies and workers run in their own process, started with an environment
  without the session's credentials (`environment_without_secrets`), so a worker restarted
  after a crash is as clean as the first; that process ends when the cluster is closed, or
  when this process ends (its standard input closes).

A `client=` the user gives (a Client or a scheduler's address) is their own trust decision:
it is used as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Any

from evo_magic.analysis.engine.base import SweepError
from evo_magic.extras import missing
from evo_magic.secrets import environment_without_secrets

STARTUP_SECONDS = 120.0
"""How long the cluster may take to start before the sweep gives up on it."""
_ROLES = ("client", "scheduler", "worker")

# Run in the cluster's own process: the credentials and settings come on standard input (not
# in the arguments or the environment, which other local users can read).
_SERVE = "from evo_magic.analysis.engine.cluster import serve; serve()"


@dataclass
class LocalDaskCluster:
    """A running cluster started by `start_cluster`: `client` is connected to it; `close()`
    (or leaving a `with` block) closes the client and ends the cluster's processes."""

    client: Any
    address: str
    process: subprocess.Popen[bytes]

    def close(self) -> None:
        """Close the client, then let the cluster close itself (ended by force after 30 s)."""
        try:
            self.client.close()
        finally:
            _end(self.process)

    def __enter__(self) -> LocalDaskCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_cluster(workers: int = 2) -> LocalDaskCluster:
    """A Dask cluster of `workers` processes (one thread each) on 127.0.0.1 that accepts only
    the returned client (TLS, temporary credentials) and whose processes hold none of the
    session's credentials. Raises `SweepError` when Dask is missing or the cluster cannot
    start (the message says why)."""
    try:
        from distributed import Client
        from distributed.security import Security
    except ImportError:
        raise SweepError(str(missing("Dask distributed", "engine='dask'", "dask"))) from None
    try:
        security = Security.temporary()
    except ImportError:  # Security.temporary needs cryptography
        raise SweepError(str(missing("cryptography", "engine='dask'", "dask"))) from None
    config = {
        "workers": workers,
        "path": [entry for entry in sys.path if isinstance(entry, str)],
        "ca": security.tls_ca_file,
        "cert": security.tls_client_cert,
        "key": security.tls_client_key,
    }
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment_without_secrets(os.environ),
            start_new_session=True,  # ended as one group; a notebook's interrupt misses it
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(config).encode() + b"\n")
            process.stdin.flush()
            address = _address(process, process.stdout, errors)
            client = Client(address, security=security, timeout=STARTUP_SECONDS)
        except BaseException:
            _end(process)
            raise
    return LocalDaskCluster(client, address, process)


def _address(process: subprocess.Popen[bytes], stdout: IO[bytes], errors: IO[bytes]) -> str:
    """The scheduler's address, as the cluster's process says it once it is up."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stdout], [], [], 1.0)
        if ready:
            line = stdout.readline()
            if line:
                return str(json.loads(line)["address"])
            break
        if process.poll() is not None:
            break
    errors.seek(0)
    said = errors.read().decode("utf-8", "replace").strip().splitlines()[-3:]
    reason = " | ".join(said) if said else "it said nothing"
    raise SweepError(f"the local Dask cluster did not start ({reason})")


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None and not process.stdin.closed:
        with contextlib.suppress(OSError):  # the cluster closes itself when its input ends
            process.stdin.close()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own group: only the cluster's processes
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def serve() -> None:
    """The cluster's process: start the cluster the parent asked for, say its address, and
    keep it up until standard input ends."""
    import logging

    config = json.loads(sys.stdin.readline())
    sys.path[:] = [*config["path"], *(entry for entry in sys.path if entry not in config["path"])]
    from distributed import LocalCluster
    from distributed.security import Security

    pem = {f"tls_{role}_{kind}": config[kind] for role in _ROLES for kind in ("cert", "key")}
    security = Security(tls_ca_file=config["ca"], require_encryption=True, **pem)
    with LocalCluster(
        n_workers=config["workers"],
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        protocol="tls://",
        security=security,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    ) as cluster:
        sys.stdout.write(json.dumps({"address": cluster.scheduler_address}) + "\n")
        sys.stdout.flush()
        sys.stdin.read()
