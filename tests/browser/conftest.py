"""The browser tests' fixtures: headless Chromium (skipped, saying why, where none is
installed), a page, a folder for screenshots and a JupyterLab home of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_harness import (
    CHROMIUM_ENV,
    CHROMIUM_FLAGS,
    SCREENSHOTS_ENV,
    LabHome,
    RunningLab,
    find_chromium,
    jupyterlab,
)
from playwright.sync_api import Browser, Page, expect, sync_playwright


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Headless Chromium, launched once per test session."""
    executable = find_chromium()
    if executable is None:
        pytest.skip(
            "no Chromium or Chrome browser installed (Debian: apt-get install chromium; or set "
            f"{CHROMIUM_ENV} to a browser binary)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (own cookies and storage); actions and assertions wait up to a minute (a
    shared machine can be slow), always for a stated DOM condition."""
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    context.set_default_timeout(60_000)
    expect.set_options(timeout=60_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: $EVO_MAGIC_SCREENSHOTS, else a folder under pytest's tmp dir."""
    configured = os.environ.get(SCREENSHOTS_ENV)
    if configured:
        folder = Path(configured)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("jupyterlab-screenshots", numbered=True)


@pytest.fixture
def lab_home(tmp_path: Path) -> LabHome:
    home = LabHome(tmp_path / "lab")
    home.prepare()
    return home


@pytest.fixture(scope="session")
def running_lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    """One JupyterLab server (a start costs seconds) for the tests that only run notebooks of
    their own in it; a test about starting, stopping or reopening starts its own."""
    home = LabHome(tmp_path_factory.mktemp("shared-lab"))
    home.prepare()
    with jupyterlab(home) as server:
        yield RunningLab(home, server)
