"""A setting is refused whole or stored whole, whatever a strategy's or a price's own check
raises: through `%config` in a real IPython shell, then a session that must still run."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_api import FakeAnthropic

from evo_magic.session import Session

USER_CODE = """
from dataclasses import dataclass

@dataclass(frozen=True)
class Picky:
    n: int = 1
    name = "picky"
    when = "over_limit"
    def __post_init__(self):
        if self.n < 0:
            raise ValueError("n must be >= 0")
    def compact(self, messages, ctx):
        return None

class Touchy:
    name = "touchy"
    compact = Picky.compact
    @property
    def when(self):
        raise ValueError("when cannot be read")
"""

REFUSED = [
    ("strategies", '["micro(keep_recent=-1)"]'),
    ("strategies", '["evo_magic.strategies.MicroCompact(keep_recent=-1)"]'),
    ("strategies", '["Picky(n=-1)"]'),  # a class of the user's namespace, its own check
    ("strategies", "[Touchy()]"),  # an object whose own attribute raises ValueError
    ("prices", '{"claude-sonnet-4-5": {"input": 10**400}}'),  # too large for a float
    ("prices", '{"claude-sonnet-4-5": {"input": float("nan")}}'),
]


def _magics(ip: Any) -> Any:
    from evo_magic.notebook.magics import AgentMagics

    return next(m for m in ip.configurables if isinstance(m, AgentMagics))


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_a_refused_setting_keeps_its_old_value_and_the_next_session_runs(
    ip: Any, api: FakeAnthropic, caplog: pytest.LogCaptureFixture, name: str, value: str
):
    from IPython.utils.capture import capture_output

    ip.run_cell(USER_CODE)
    magics = _magics(ip)
    before = getattr(magics, name)
    ip.run_line_magic("config", f"AgentMagics.{name} = {value}")
    assert getattr(magics, name) == before  # refused whole: nothing stored
    (said,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert said.startswith(f"AgentMagics.{name}") and said.endswith("The setting is unchanged.")
    assert "\n" not in said  # one line, no traceback
    with capture_output() as captured:
        ip.run_cell_magic("agent", "", "Survey the project.")
    assert "Traceback" not in captured.stdout + captured.stderr
    assert api.accepted  # the session ran


def test_a_price_its_rule_cannot_convert_is_refused_by_the_session_too(tmp_path: Any):
    with pytest.raises(ValueError, match=r"^SessionSettings.prices: .*OverflowError"):
        Session(tmp_path, model="offline", prices={"claude-sonnet-4-5": {"input": 10**400}})
