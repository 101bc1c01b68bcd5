"""Compiled bytecode for the fresh processes the benchmarks start.

A fresh process times its imports and its first calls. An ordinary install keeps the package's
compiled bytecode, but an environment that sets PYTHONDONTWRITEBYTECODE (or a checkout whose
sources changed since they were compiled) makes every child compile the sources again, and the
rows would measure the compiler. The benchmarks that start processes call `compiled()` first.
"""

from __future__ import annotations

import compileall
import functools
from pathlib import Path

import evo_magic


@functools.cache
def compiled() -> None:
    """Write evo_magic's bytecode cache where it is missing or stale (once per process)."""
    compileall.compile_dir(Path(evo_magic.__file__).parent, quiet=1)
