"""0.1's ways of changing a session, kept for one version (0.2) and removed in 0.3.

0.1 let you assign a session's settings one by one (`session.max_turns = 5`, `session.policy =
...`, `session.strategies = [...]`): four ways to set one setting, and a part's attribute (such
as `session.compactor.policy`) changed a running limit without a record. Since 0.2 a setting is
changed by `Session.configure(**changes)` (checked whole, recorded once) and read in
`Session.settings`. Assigning one of the names below still works, with a DeprecationWarning
saying what replaces it; reading one that moved into `settings` does too.
"""

from __future__ import annotations

import warnings
from typing import Any

RENAMED: dict[str, str] = {
    "system": "system_prompt",
    "max_turns": "max_turns",
    "max_tokens": "max_tokens",
    "bash_timeout": "bash_timeout",
    "sandbox": "sandbox",
    "bash_settings": "bash",
    "policy": "policy",
    "cache": "cache",
    "prices": "prices",
    "settings": "settings",
    "model": "model",
    "strategies": "strategies",
    "summariser": "summariser",
}
"""Attributes 0.1 let you assign -> the name `configure` takes."""

READ_IN_SETTINGS = ("max_turns", "max_tokens", "bash_timeout", "sandbox", "bash_settings", "cache")
"""Reads 0.1 had that are `session.settings.<name>` now."""


class SettersOf01:
    """The deprecated setters (see the module docstring); a `Session` is one."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in RENAMED:
            object.__setattr__(self, name, value)
            return
        key = RENAMED[name]
        warnings.warn(
            f"assigning Session.{name} is deprecated; use session.configure({key}=...)",
            DeprecationWarning,
            stacklevel=2,
        )
        configure = self.configure  # type: ignore[attr-defined]
        if key == "settings":
            configure(value)
        else:
            configure(**{key: value})

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: 0.1's reads of settings moved to `settings`.
        if name in READ_IN_SETTINGS:
            key = RENAMED[name]
            warnings.warn(
                f"Session.{name} is deprecated; read session.settings.{key}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(self.settings, key)  # type: ignore[attr-defined]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
