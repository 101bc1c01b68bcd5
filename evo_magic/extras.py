"""The optional extras (`pip install 'evo-magic[notebooks]'`, ...) and how to install one from
where the user is: into an editable checkout when evo_magic runs from one (the quick start's
`pip install -e .`), from the package index otherwise."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "evo-magic"


class MissingExtra(ImportError):
    """An optional dependency is missing; the message says which extra brings it and the
    command that installs it."""


def checkout() -> Path | None:
    """The source checkout evo_magic is installed from in editable mode, or None when it is
    installed as a package (or its install records say nothing)."""
    # Imported here: importlib.metadata costs ~15 ms, and `%load_ext` reaches this module.
    from importlib import metadata

    try:
        record = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        url = json.loads(record or "{}")
    except json.JSONDecodeError:
        return None
    if not url.get("dir_info", {}).get("editable"):
        return None
    parsed = urlparse(url.get("url", ""))
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def install_command(extra: str, cwd: Path | None = None) -> str:
    """The shell command that installs `extra`: `python -m pip install -e '.[extra]'` from
    inside the editable checkout (its path instead of `.` elsewhere), `python -m pip install
    'evo-magic[extra]'` for an installed package."""
    source = checkout()
    if source is None:
        return f"python -m pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    here = (cwd or Path.cwd()).resolve()
    where = "." if source.resolve() == here else str(source)
    return f"python -m pip install -e {shlex.quote(f'{where}[{extra}]')}"


def missing(module: str, needed_for: str, extra: str) -> MissingExtra:
    """The error to raise when `module` cannot be imported: "`needed_for` needs `module`:
    install the `extra` extra: <command>"."""
    return MissingExtra(
        f"{needed_for} needs {module}, which the {extra!r} extra installs: {install_command(extra)}"
    )
