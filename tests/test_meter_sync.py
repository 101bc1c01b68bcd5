"""The live meter's synced state on a real ipykernel: what a refresh sends the front end (the
comm messages on the kernel's iopub channel) does not grow with the session, and a front end
that asks for the state, or a refresh at the end of an ask, gets the whole lists."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.kernels import kernel

pytestmark = pytest.mark.slow  # starts a kernel

SETUP = """
import time
from pathlib import Path
from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import ContextSize, ModelCalled
from evo_magic.meter.log import CallPoint, Compaction, MeterLog
from evo_magic.notebook.widget import REFRESH_SECONDS, ContextMeter
from evo_magic.session import Session

session = Session(Path("work"), model="offline", policy=CompactPolicy(context_limit=12_000))

def step(log, n):
    # Call n as the log folds it: a call, and every other call a micro-compaction before it.
    size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)
    log.calls.append(CallPoint(n, n // 10 + 1, size, size, None, 0.001, ("tool results",)))
    if n % 2:
        log.compactions.append(Compaction(0, True, "micro", "micro", "every_call", None, size,
                                          size, True, n, n // 10 + 1, cleared=("read_file",)))

def one_call_later(meter, live):
    n = len(meter.meter_log.calls) + 1
    step(meter.meter_log, n)
    if live:
        time.sleep(REFRESH_SECONDS)  # the throttle lets the next event refresh
        meter.on_event(ModelCalled(n, meter.meter_log.calls[-1].sent))
    else:
        meter.refresh()

meters = {}
def grown(calls):
    log = MeterLog()
    for n in range(1, calls + 1):
        step(log, n)
    meters[calls] = meter = ContextMeter(session, log=log)
    return meter.model_id
"""


def run(client: Any, code: str) -> list[dict[str, Any]]:
    """Run `code` in the kernel; the comm messages it sent (the content of each)."""
    sent: list[dict[str, Any]] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "comm_msg":
            sent.append(msg["content"])

    reply = client.execute_interactive(code, timeout=120, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return sent


def one_call_later(client: Any, calls: int, live: bool) -> list[dict[str, Any]]:
    """What the meter made at `calls` calls sends at a refresh after one more call: `live`, as
    the session's next model call makes it refresh while the ask runs (once the throttle's
    pause passed); else as `refresh()` by hand does."""
    return run(client, f"one_call_later(meters[{calls}], {live})")


def size(messages: list[dict[str, Any]], html: bool = True) -> int:
    """Bytes of the messages' JSON (`html=False`: but the meter's HTML)."""
    total = 0
    for message in messages:
        data = message["data"]
        if not html and data["method"] == "update":
            data = {**data, "state": {k: v for k, v in data["state"].items() if k != "value"}}
        total += len(json.dumps(data))
    return total


def rows_sent(messages: list[dict[str, Any]], name: str) -> list[list[Any]]:
    """Each list `name` in the messages: whole in a state update, new rows in an append."""
    found = []
    for message in messages:
        data = message["data"]
        if data["method"] == "update" and name in data["state"]:
            found.append(data["state"][name])
        elif data["method"] == "custom" and data["content"]["method"] == "append":
            found.append(data["content"][name])
    return found


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One kernel for the module (a start costs seconds), with the helpers defined."""
    workspace = tmp_path_factory.mktemp("meter-sync")
    (workspace / "work").mkdir()
    with kernel(workspace) as (_, kc):
        run(kc, SETUP)
        yield kc


@pytest.fixture
def client(started: Any) -> Any:
    """The kernel with meters of 100, 1,000 and 5,000 calls made anew for the test: a test
    adds calls to them, so none sees another's."""
    for calls in (100, 1_000, 5_000):
        run(started, f"grown({calls})")
    return started


def test_a_live_refresh_sends_the_same_at_100_and_5000_calls(client: Any):
    """A refresh while an ask runs sends the new call and its micro-compaction, not the
    lists (it sent every call's row: 1.9 MB at 5,000 calls, 126 KB at 100)."""
    small, large = one_call_later(client, 100, True), one_call_later(client, 5_000, True)
    for calls, sent in ((100, small), (5_000, large)):
        assert [len(r) for r in rows_sent(sent, "calls")] == [1], "the new call only"
        assert rows_sent(sent, "calls")[0][0]["call"] == calls + 1
        assert [len(r) for r in rows_sent(sent, "compactions")] == [1]
        (append,) = [m["data"]["content"] for m in sent if m["data"]["method"] == "custom"]
        at = {"sizes": calls, "calls": calls, "compactions": calls // 2}
        assert append["at"] == at  # where the new rows go in the front end's lists
    # Besides the meter's HTML: the numbers and the new rows, some 800 bytes at any length.
    assert size(large, html=False) <= size(small, html=False) + 100 < 1_000
    # The HTML's chart draws all its columns from 160 calls on: past that it stays put.
    drawn = one_call_later(client, 1_000, True)
    assert size(large) <= 1.1 * size(drawn), (size(drawn), size(large))


def test_a_front_end_asking_for_the_state_gets_the_whole_lists(client: Any):
    """A front end that (re)connects asks for the state: it gets every row, the appended
    ones included."""
    appended = one_call_later(client, 100, True)
    assert [len(rows) for rows in rows_sent(appended, "calls")] == [1]
    (model,) = {m["comm_id"] for m in appended if m["data"]["method"] == "custom"}
    request = client.session.msg(
        "comm_msg", {"comm_id": model, "data": {"method": "request_state"}}
    )
    client.shell_channel.send(request)
    sent = []
    while True:  # the kernel's answer, on iopub, until it is idle again
        msg = client.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != request["header"]["msg_id"]:
            continue
        if msg["msg_type"] == "comm_msg":
            sent.append(msg["content"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    (calls,) = rows_sent(sent, "calls")
    assert [c["call"] for c in calls] == list(range(1, 102))


def test_a_whole_refresh_sends_every_row(client: Any):
    """At the end of an ask (and after a full compaction) the lists go whole, so a saved
    notebook's widget state holds the whole meter."""
    sent = one_call_later(client, 5_000, False)
    (calls,) = rows_sent(sent, "calls")
    assert [c["call"] for c in calls] == list(range(1, 5_002))
    assert not [m for m in sent if m["data"]["method"] == "custom"]


def test_the_end_of_an_ask_sends_the_whole_lists_after_appends(client: Any):
    """Rows appended while the ask ran go whole at its end even when none is new since, so
    a saved notebook's widget state (which keeps state updates, not custom messages) holds
    every row."""
    one_call_later(client, 100, True)
    sent = run(client, "meters[100].refresh()")  # as at the end of an ask: nothing new
    (calls,) = rows_sent(sent, "calls")
    assert [c["call"] for c in calls] == list(range(1, 102))
    assert not rows_sent(run(client, "meters[100].refresh()"), "calls")  # held whole now
