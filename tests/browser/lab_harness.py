"""The real-browser harness: JupyterLab on loopback and the system's headless Chromium.

Nothing is downloaded at run time: the browser is the one installed on the machine (Debian's
`chromium`), driven through Playwright's bundled driver. Without a browser the tests skip and
say why. The servers see no Anthropic credentials, so the notebooks run the offline model.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ENV = "EVO_MAGIC_CHROMIUM"
"""A Chrome or Chromium binary to use instead of the one found on PATH."""
SCREENSHOTS_ENV = "EVO_MAGIC_SCREENSHOTS"
"""A folder for the screenshots instead of pytest's temporary directory."""
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Work as root and offline: no sandbox (root), no GPU, and none of the browser's own traffic;
# every host name but loopback resolves to nothing.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
KERNEL = "Python 3 (evo_magic tests)"
NO_KERNEL = "evo-magic-test-no-such-kernel"
# JupyterLab settings of the test profile: no news feed or update check (they reach the
# internet), every cell in the DOM (no windowing), and the widget state NOT saved in the
# notebook, JupyterLab's default, so a meter must show without it.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": False},
}
START_TIMEOUT = 90.0


def find_chromium() -> str | None:
    """The browser binary: $EVO_MAGIC_CHROMIUM, else the first Chromium or Chrome on PATH."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"{CHROMIUM_ENV}={configured!r} is not an executable file")
        return configured
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@dataclass
class LabHome:
    """A JupyterLab profile of its own: root directory, settings, config, data and runtime."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    def prepare(self) -> None:
        for name in ("root", "config", "data", "runtime", "ipython", "workspaces"):
            (self.base / name).mkdir(parents=True, exist_ok=True)
        # The notebooks' kernel ("python3") is this Python, where evo_magic is importable.
        spec = self.base / "data" / "kernels" / "python3" / "kernel.json"
        spec.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec.write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
        for plugin, values in LAB_SETTINGS.items():
            path = self.base / "settings" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def env(self) -> dict[str, str]:
        """The server's (and so the kernel's) environment: no Anthropic credentials, no user
        Jupyter or IPython configuration, and this checkout's evo_magic first on the path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(
            JUPYTER_CONFIG_DIR=str(self.base / "config"),
            JUPYTER_DATA_DIR=str(self.base / "data"),
            JUPYTER_RUNTIME_DIR=str(self.base / "runtime"),
            JUPYTER_PREFER_ENV_PATH="0",  # our data dir (the kernel above) before sys.prefix's
            IPYTHONDIR=str(self.base / "ipython"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        )
        return env


@dataclass
class LabServer:
    """A running JupyterLab server on loopback."""

    port: int
    token: str
    process: subprocess.Popen
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?token={self.token}"

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(self.url(f"api/{path}"), timeout=10) as response:
            return json.load(response)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class RunningLab:
    """A JupyterLab server running in its own home, kept up for several tests: each writes
    and opens notebooks of its own names, each on a kernel of its own."""

    home: LabHome
    server: LabServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def jupyterlab(home: LabHome, *, kernels: bool = True) -> Iterator[LabServer]:
    """Run JupyterLab on 127.0.0.1 with a random port and token, serving `home.root`, its
    `python3` kernel being this Python; `kernels=False` offers no kernel at all (a reader who
    has the notebook but not its kernel). Stops the server and its kernels on exit."""
    port, token = free_port(), secrets.token_hex(16)
    args = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={home.root}",
        f"--LabApp.user_settings_dir={home.base / 'settings'}",
        f"--LabApp.workspaces_dir={home.base / 'workspaces'}",
        "--LabApp.extension_manager=readonly",  # never asks a package index
        "--ServerApp.jpserver_extensions={'jupyter_lsp': False}",
    ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    if not kernels:
        args.append(f"--KernelSpecManager.allowed_kernelspecs={NO_KERNEL}")
    log = home.base / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            cwd=home.root,
            env=home.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(port, token, process, log)
    try:
        _wait_until_serving(server)
        yield server
    finally:
        _stop(process)


def _wait_until_serving(server: LabServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if server.process.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            server.api("status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                pytest.fail(
                    f"JupyterLab did not serve within {START_TIMEOUT:.0f}s:\n{server.log_tail()}"
                )
            time.sleep(0.1)  # polling the server's own status endpoint until it answers


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (the server shuts its kernels down), then SIGKILL to its process group."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
