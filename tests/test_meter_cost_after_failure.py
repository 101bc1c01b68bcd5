"""A failed `%compact` on the offline model costs nothing, and the meter says so: it made no
summary, so there is no price it could lack (it used to say "cost unknown")."""

from __future__ import annotations

import json

from IPython.utils.capture import capture_output

from evo_magic.meter.data import MeterData
from evo_magic.meter.text import meter_text

BROKEN = """
class Broken:
    name = "broken"
    when = "on_request"

    def compact(self, messages, ctx):
        raise RuntimeError("no luck")
"""


def test_a_failed_compact_on_the_offline_model_leaves_the_cost_known(ip):
    with capture_output():
        ip.run_cell_magic("agent", "--offline --max-turns 1", "Look around.")
    ip.run_cell(BROKEN)
    with capture_output() as captured:
        ip.run_line_magic("compact", "--strategy Broken")
    assert "FAILED, history kept: broken raised RuntimeError: no luck" in captured.stdout
    magics = ip.magics_manager.registry["AgentMagics"]
    session, registry = magics.sessions["default"], magics.registry
    assert session.cost_usd == 0.0
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    failed = [r for r in records if r["kind"] == "compaction" and not r["success"]]
    assert [r["summary_cost_usd"] for r in failed] == [0.0]
    meter = meter_text(MeterData.of_session(session, registry.meter_log(session)))
    assert "cost unknown" not in meter
    assert "1 model call\n" in meter
