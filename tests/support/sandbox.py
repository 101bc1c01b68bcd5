"""The bash sandbox setting for tests of bash's own behaviour."""

from __future__ import annotations


def sandbox_here() -> str:
    """The default sandbox where bubblewrap works; "off" elsewhere, so that the one-time
    warning of a machine without it (tested in test_sandbox.py) does not stand in front of the
    output the tests read."""
    from evo_magic.tools import DEFAULT_SANDBOX, sandbox_status

    return DEFAULT_SANDBOX if sandbox_status().available else "off"
