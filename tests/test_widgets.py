"""The context meter: each cell's own story, the live widget's state, the static HTML a saved
notebook keeps (chart, composition, compactions), the terminal text, and no secret anywhere."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import AskFinished, CompactionFinished, Event
from evo_magic.measure import to_json
from evo_magic.meter.chart import CONTEXT_CALLS, MAX_COLUMNS
from evo_magic.meter.chart_html import PLOT_W
from evo_magic.meter.composition import SYSTEM
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import MeterLog, follow
from evo_magic.models import FunctionModel
from evo_magic.notebook.widget import ContextMeter, static_meter
from evo_magic.render import cell_cost, clip, usd
from evo_magic.session import Session

SECRET = "sk-ant-test-WIDGET-SECRET-1234"
SURVEY = "Survey the project and keep notes."
AGAIN = "Now look again and double-check the notes against the code."
FOCUS = "the notes file and the TODOs"


@pytest.fixture
def session(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    with Session(workspace, model="offline", policy=CompactPolicy(context_limit=12_000)) as s:
        yield s


@pytest.fixture
def new_session(workspace: Path) -> Iterator[Callable[..., Session]]:
    """Makes sessions in the workspace; closes them (their transcripts) afterwards."""
    made: list[Session] = []

    def make(**options: Any) -> Session:
        made.append(Session(workspace, **options))
        return made[-1]

    yield make
    for session in made:
        session.close()


def run_cells(session: Session, log: MeterLog, *cells: str | None) -> list[ContextMeter]:
    """Each cell as the magics run it: a cell meter made before, finished after. None is a
    `%compact` with FOCUS."""
    meters = []
    for task in cells:
        meter = ContextMeter(session, log=log, scope="cell")
        if task is None:
            session.compact(FOCUS)
        else:
            session.ask(task)
        meter.finish()
        meters.append(meter)
    return meters


def chart(page: str) -> ET.Element:
    """The meter's chart (the meter's HTML is well-formed XML)."""
    (found,) = by_class(ET.fromstring(page), "evo-chart")
    return found


def style(element: ET.Element, name: str) -> float:
    """A pixel length of an element's inline style."""
    found = re.search(rf"(?:^|;){name}:([\d.-]+)px", element.get("style", ""))
    assert found, (name, element.get("style"))
    return float(found.group(1))


def left(element: ET.Element) -> float:
    return style(element, "left")


def width(element: ET.Element) -> float:
    return style(element, "width")


def by_class(root: ET.Element, name: str) -> list[ET.Element]:
    return [el for el in root.iter() if name in (el.get("class") or "").split()]


def texts(element: ET.Element) -> str:
    return " ".join(t.strip() for t in element.itertext() if t.strip())


# -- each cell keeps its own story ---------------------------------------------------------


def test_each_cell_meter_tells_only_its_own_cell(session: Session):
    log = follow(session)
    sizes = [session.context()]
    ends: list = []
    session.subscribe(lambda e: ends.append(e.context) if isinstance(e, AskFinished) else None)
    first, second, compact = run_cells(session, log, SURVEY, AGAIN, None)
    sizes += [ends[0], ends[1], session.context()]

    states = [meter.get_state() for meter in (first, second, compact)]
    for state, before, after in zip(states, sizes, sizes[1:], strict=False):
        assert state["scope"] == "cell"
        assert (state["before"]["messages"], state["before"]["chars"]) == (
            before.messages,
            before.chars,
        )
        assert (state["messages"], state["chars"]) == (after.messages, after.chars)
    # The first cell only micro-compacted; the second ran the automatic compaction; the
    # %compact cell holds its one manual compaction and no model call.
    assert {row["micro"] for row in states[0]["compactions"]} == {True}
    assert [r["trigger"] for r in states[1]["compactions"] if not r["micro"]] == ["auto"]
    assert [(r["trigger"], r["focus"]) for r in states[2]["compactions"]] == [("user", FOCUS)]
    assert states[2]["model_calls"] == 0
    calls = [s["model_calls"] for s in states]
    assert [c["call"] for c in states[1]["calls"]] == list(range(calls[0] + 1, sum(calls) + 1))
    # Later cells changed nothing in the first cell's meter, state or HTML.
    assert FOCUS not in first._view.value and "auto" not in json.dumps(states[0])
    assert first.finish()["text/html"] == first._view.value


def test_a_finished_cell_meter_never_changes(session: Session):
    log = follow(session)
    (meter,) = run_cells(session, log, SURVEY)
    kept, state = meter.finish(), meter.get_state()
    session.ask(AGAIN)
    session.compact(FOCUS)
    meter.refresh()
    assert meter.finish() == kept and meter.snapshot() == kept
    assert meter.get_state() == state


def test_live_views_and_the_snapshot_are_one_rendering(session: Session):
    """While the cell runs, whenever the widget has refreshed, its HTML is exactly the static
    snapshot of the same moment; at the end the cell keeps that HTML."""
    meter = ContextMeter(session, log=follow(session), scope="cell")
    seen: list[tuple[str, str, int]] = []

    def check(event: Event) -> None:
        if isinstance(event, CompactionFinished):
            shown = meter._view.value
            seen.append((shown, meter.snapshot()["text/html"], meter.get_state()["chars"]))

    session.subscribe(check)  # after the meter: it has refreshed on this event already
    session.ask(SURVEY)
    session.ask(AGAIN)
    final = meter.finish()
    assert seen, "the task compacts"
    for shown, snapshot, chars in seen:
        assert shown == snapshot
        assert f"data-chars='{chars}'" in shown
    assert final["text/html"] == meter._view.value
    assert meter.get_state()["chars"] == session.context().chars


def test_session_meter_follows_every_cell(session: Session):
    log = follow(session)
    live = ContextMeter(session, log=log)
    run_cells(session, log, SURVEY, AGAIN, None)
    state = live.get_state()
    assert state["scope"] == "session" and state["before"] is None
    assert state["chars"] == session.context().chars
    assert state["model_calls"] == session.calls
    full = [row for row in state["compactions"] if not row["micro"]]
    assert [(row["label"], row["trigger"]) for row in full] == [("C1", "auto"), ("C2", "user")]
    assert static_meter(session, log)["text/html"] == live._view.value


def test_finished_cell_meter_stops_listening(session: Session):
    log = follow(session)
    (meter,) = run_cells(session, log, SURVEY)
    assert meter.on_event not in log._listeners
    meter.close()
    session.ask(AGAIN)  # a closed meter is no observer any more: nothing raises
    log.stop()
    assert log not in session._observers


# -- the header: what changed, on one basis ------------------------------------------------------


def test_the_header_says_what_changed_in_tokens_and_messages(session: Session):
    log = follow(session)
    first, second = run_cells(session, log, SURVEY, AGAIN)
    root = ET.fromstring(second._view.value)
    title, story, counts = list(root)[:3]
    shown = " ".join(texts(part) for part in (title, story, counts))
    assert texts(title) == "context meter · this cell (ask 2)"
    assert session.session_id not in shown and session.session_id in title.get("title")
    before, now = second.data.scope.before, second.data.current
    (before_span,) = by_class(root, "evo-before")
    (now_span,) = by_class(root, "evo-now")
    for span, size in ((before_span, before), (now_span, now)):
        approx = "" if size.tokens_exact else "~"
        assert texts(span) == f"{approx}{size.tokens:,} tokens · {size.messages} messages"
        assert f"{size.chars:,} characters" in span.get("title")
    (change,) = by_class(root, "evo-change")
    tokens, messages = now.tokens - before.tokens, now.messages - before.messages
    assert tokens < 0 and messages < 0, "the cell ended compacted"
    assert texts(change) == f"(-{-tokens:,} tokens, -{-messages:,} messages)"
    assert counts.get("class") == "evo-counts"
    assert re.fullmatch(
        r"\d+ model calls \(\d+–\d+\) · 1 full compaction · \d+ micro-compactions?", texts(counts)
    ), "the offline model costs nothing: no cost is shown"
    assert "$" not in shown
    numbers = [*story, *counts]
    assert all("white-space:nowrap" in (el.get("style") or "") for el in numbers)


def test_every_share_is_of_the_whole_prompt_in_tokens(session: Session):
    log = follow(session)
    (meter,) = run_cells(session, log, SURVEY)
    data = meter.data
    root = ET.fromstring(meter._view.value)
    (fill,) = by_class(root, "evo-fill")
    assert data.fill() == pytest.approx(data.current.tokens / data.limit_tokens)
    approx = "" if data.current.tokens_exact else "~"
    assert texts(fill) == (
        f"{data.fill():.0%} of the limit: {approx}{data.current.tokens:,} of "
        f"{data.limit_tokens:,} tokens (12,000 chars of messages)"
    )
    # The limit in tokens: the prompt's tokens once the messages reach 12,000 characters.
    room = round((12_000 - data.current.chars) * session.history.tokens_per_char)
    assert data.limit_tokens == data.current.tokens + room
    shares = by_class(root, "evo-share")
    tokens = [int(share.get("data-tokens")) for share in shares]
    assert abs(sum(tokens) - data.current.tokens) <= len(shares)  # rounding only
    for share in shares:
        assert re.search(r"~[\d,]+ tokens, [\d,]+ chars \(\d+%\)$", share.get("title"))
    (limit,) = by_class(chart(meter._view.value), "evo-limit")
    assert f"{data.limit_tokens:,} tokens" in texts(limit)


def test_what_was_removed_is_an_outline_behind_the_column_not_a_stack(session: Session):
    log = follow(session)
    run_cells(session, log, SURVEY, AGAIN)
    plot = chart(static_meter(session, log)["text/html"])
    c1 = next(row for row in log.compactions if not row.micro)
    after = next(p for p in by_class(plot, "evo-point") if int(p.get("data-call")) > c1.after_call)
    (ghost,) = by_class(after, "evo-removed")
    (sent,) = by_class(after, "evo-sent")
    assert list(after).index(ghost) < list(after).index(sent), "drawn first: behind the column"
    assert all(";bottom:0;" in el.get("style") for el in (ghost, sent)), "both from the axis"
    assert style(ghost, "height") > 2 * style(sent, "height"), "the history was much larger"
    assert "dashed" in ghost.get("style") and "background" not in ghost.get("style")


# -- the chart -------------------------------------------------------------------------------


def test_chart_has_axes_limit_and_a_tooltip_per_call(session: Session):
    log = follow(session)
    run_cells(session, log, SURVEY, AGAIN)
    plot = chart(static_meter(session, log)["text/html"])
    (x_axis,) = by_class(plot, "evo-axis-x")
    (y_axis,) = by_class(plot, "evo-axis-y")
    assert "model call" in texts(x_axis) and "context sent (tokens" in texts(y_axis)
    assert re.search(r"\b\d+(\.\d+)?k\b", texts(y_axis))  # ticks in thousands of tokens
    (limit,) = by_class(plot, "evo-limit")
    data = MeterData.of_session(session, log)
    assert texts(limit) == f"limit 12,000 chars ≈ {data.limit_tokens:,} tokens"
    points = by_class(plot, "evo-point")
    assert [int(p.get("data-call")) for p in points] == [c.call for c in log.calls]
    for point, call in zip(points, log.calls, strict=True):
        tip = point.get("title")
        assert tip.startswith(f"call {call.call} (ask {call.turn})\nsent ")
        assert f"{call.sent.chars:,} chars" in tip and f"{call.tokens:,} tokens" in tip
        assert 0 <= left(point) + width(point) / 2 <= PLOT_W
    tips = [p.get("title") for p in points]
    assert "before it: request 1: 'Survey the project and keep notes.'" in tips[0]
    assert any("tool results (read_file ×" in tip for tip in tips)
    assert any(re.search(r"micro: freed [\d,]+ chars", tip) for tip in tips)
    assert any("compaction C1 summarise (automatic)" in tip for tip in tips)


def test_every_compaction_is_marked_inside_the_chart(session: Session):
    log = follow(session)
    run_cells(session, log, SURVEY, AGAIN, None)  # the %compact comes after the last call
    marks = by_class(chart(static_meter(session, log)["text/html"]), "evo-mark")
    kinds = [m.get("data-kind") for m in marks]
    micro = [c for c in log.compactions if c.micro]
    assert kinds.count("full") == 2 and kinds.count("micro") == len(micro)
    assert [m.get("data-label") for m in marks if m.get("data-kind") == "full"] == ["C1", "C2"]
    for mark in marks:
        assert 0 <= left(mark) + width(mark) / 2 <= PLOT_W, mark.get("title")
        assert mark.get("title")
    (c2,) = [m for m in marks if m.get("data-label") == "C2"]
    assert FOCUS in c2.get("title") and "by hand, %compact" in c2.get("title")
    last_call = max(
        left(p) for p in by_class(chart(static_meter(session, log)["text/html"]), "evo-point")
    )
    assert left(c2) > last_call  # after the last call, and still inside


def test_a_cell_chart_shows_the_session_so_far_with_its_own_calls_shaded(session: Session):
    log = follow(session)
    first, second = run_cells(session, log, SURVEY, AGAIN)
    plot = chart(second._view.value)
    assert len(by_class(plot, "evo-point")) == len(log.calls)
    (band,) = by_class(plot, "evo-cell-band")
    own = [m for m in by_class(plot, "evo-mark") if m.get("data-own") == "true"]
    assert len(own) == len(second.get_state()["compactions"])
    seventh = next(p for p in by_class(plot, "evo-point") if p.get("data-call") == "7")
    assert left(band) <= left(seventh) + width(seventh) / 2  # the shading starts at call 7
    sixth = next(p for p in by_class(plot, "evo-point") if p.get("data-call") == "6")
    assert left(band) > left(sixth) + width(sixth) / 2
    assert len(by_class(chart(first._view.value), "evo-point")) == 6  # only what came before


def test_chart_says_when_there_is_nothing_to_draw(session: Session):
    meter = ContextMeter(session, log=follow(session), scope="cell")
    page = meter.finish()["text/html"]
    assert "evo-chart-empty" in page and "no model call yet" in page


def test_meter_html_passes_an_untrusted_notebooks_sanitiser(session: Session):
    """JupyterLab sanitises the HTML of an untrusted notebook with an allow-list: no SVG, no
    <style>, no script. The meter uses none of them, so it shows the same for a colleague."""
    log = follow(session)
    run_cells(session, log, SURVEY, AGAIN, None)
    page = static_meter(session, log)["text/html"]
    tags = {el.tag for el in ET.fromstring(page).iter()}
    assert tags <= {
        "div",
        "span",
        "b",
        "code",
        "details",
        "summary",
        "table",
        "tr",
        "th",
        "td",
        "br",
    }, tags
    assert "<svg" not in page and "<style" not in page and "<script" not in page


# -- what the context holds -------------------------------------------------------------------


def test_composition_adds_up_to_the_prompt_by_kind(session: Session):
    log = follow(session)
    session.ask(SURVEY)
    shares = {share.kind: share.chars for share in log.compose()}
    messages = session.messages
    assert sum(shares.values()) == session.history.overhead_chars + sum(
        len(to_json(m)) for m in messages
    )
    assert shares[SYSTEM] == session.history.overhead_chars
    assert {"user text", "assistant text", "tool calls", "tool results · read_file"} <= set(shares)
    read = [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b["tool_use_id"].startswith("toolu_offline_0002")
    ]
    assert shares["tool results · read_file"] >= sum(len(to_json(b)) for b in read)
    page = static_meter(session, log)["text/html"]
    shown = dict(re.findall(r"class='evo-share' data-kind='([^']+)' data-chars='(\d+)'", page))
    assert {html.unescape(k): int(v) for k, v in shown.items()} == shares


def test_a_full_compaction_says_what_it_replaced(session: Session):
    log = follow(session)
    meter = ContextMeter(session, log=log, scope="cell")
    session.ask(SURVEY)
    session.ask(AGAIN)
    meter.finish()
    full = next(row for row in log.compactions if not row.micro)
    before = {s.kind for s in full.replaced}
    assert any(kind.startswith("tool results") for kind in before)
    after = {s.kind for s in full.kept}
    assert "summaries" in after and not any(kind.startswith("tool") for kind in after)
    page = meter._view.value
    details = re.search(
        r"<details class='evo-compaction' data-kind='full'.*?</details>", page, re.S
    )
    assert details, "the compaction is listed"
    body = details.group(0)
    assert "<summary" in body and "class='evo-summary'" in body
    assert html.escape(full.summary) in body  # the whole summary, not a clipped one
    assert "class='evo-replaced'" in body and "tool results · read_file" in body
    assert "focus</b>: none" in body


# -- the compaction list ------------------------------------------------------------------------


def test_full_and_manual_compactions_stay_listed_micro_ones_are_grouped(session: Session):
    log = follow(session)
    tasks = [SURVEY, AGAIN, None, SURVEY, AGAIN, SURVEY]
    run_cells(session, log, *tasks)
    page = static_meter(session, log)["text/html"]
    rows = re.findall(r"<details class='evo-compaction' data-kind='(\w+)'[^>]*>", page)
    full = [row for row in log.compactions if not row.micro]
    assert rows.count("full") == len(full) >= 3
    micro_asks = {row.turn for row in log.compactions if row.micro}
    groups = re.findall(r"data-kind='micro' data-ask='(\d+)' data-count='(\d+)'", page)
    assert {int(ask) for ask, _ in groups} == micro_asks
    assert sum(int(n) for _, n in groups) == len([r for r in log.compactions if r.micro])
    assert f"focus “{FOCUS}”" in page  # the manual one, with its focus, is still there
    assert "earlier" not in page  # nothing hidden behind "... N earlier"


def test_numbers_have_units_and_singular_nouns(session: Session):
    log = follow(session)
    run_cells(session, log, SURVEY, AGAIN, None)
    meter = static_meter(session, log)
    for text in (meter["text/html"], meter["text/plain"]):
        assert not re.search(r"(?<![\d,])1 messages", text) and "1 message," in text
        assert re.search(r"[\d,]+ chars", text) and re.search(r"[\d,]+ tokens", text)
        assert not re.search(r"msgs / [\d,]+(?! chars)", text)


# -- cost ---------------------------------------------------------------------------------------


def test_cell_cost_is_the_asks_cost(new_session, claude, fake):
    from support.responders import offline_responder

    fake.responder = offline_responder()
    session = new_session(model=claude, policy=CompactPolicy(context_limit=12_000))
    log = follow(session)
    finished: list[AskFinished] = []
    session.subscribe(lambda e: finished.append(e) if isinstance(e, AskFinished) else None)
    (meter,) = run_cells(session, log, SURVEY)
    cost = cell_cost(finished[0])
    assert cost is not None and cost > 0
    assert meter.get_state()["cost_usd"] == pytest.approx(cost)
    (counts,) = by_class(ET.fromstring(meter._view.value), "evo-counts")
    assert f"cost {usd(cost)}" in texts(counts)


def test_cost_is_unknown_without_a_price(new_session):
    model = FunctionModel(lambda request: [{"type": "text", "text": "done"}])
    session = new_session(model=model)
    (meter,) = run_cells(session, follow(session), SURVEY)
    assert meter.get_state()["cost_usd"] is None
    (counts,) = by_class(ET.fromstring(meter._view.value), "evo-counts")
    assert "cost unknown (a model without a price)" in texts(counts)
    assert "cost unknown" in meter.finish()["text/plain"]


# -- text, bundle, failures, secrets -------------------------------------------------------------


def test_terminal_text_tells_the_cell(session: Session):
    log = follow(session)
    first, second, compact = run_cells(session, log, SURVEY, AGAIN, None)
    text = second.finish()["text/plain"]
    assert text.startswith("context meter · this cell (ask 2)")
    assert "before the cell -> " in text
    assert re.search(r"C1 after call \d+: summarise \(over-limit strategy; automatic\)", text)
    assert re.search(r"ask 2: \d+ micro-compactions? \(micro", text)
    plain = compact.finish()["text/plain"]
    assert f'focus "{FOCUS}"' in plain and "by hand, %compact" in plain
    assert "0 model calls" in plain


def test_mimebundle_of_a_live_meter_has_the_widget_and_its_static_parts(session: Session):
    meter = ContextMeter(session)
    session.ask(SURVEY)
    bundle = meter._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == meter._view.value == meter.snapshot()["text/html"]
    assert bundle["text/plain"].startswith("context meter · the whole session")


class Broken:
    """A strategy that fails."""

    name = "broken"
    when = "on_request"

    def compact(self, messages, ctx):
        raise RuntimeError("out of ideas")


def test_failed_compaction_is_shown_as_failed(session: Session):
    meter = ContextMeter(session)
    session.compact()  # nothing to compact yet: not a failure
    assert "failed" not in meter.snapshot()["text/plain"]
    session.ask(SURVEY)
    session.compact(strategy=Broken())
    page, text = meter.snapshot()["text/html"], meter.snapshot()["text/plain"]
    assert "failed: broken raised RuntimeError: out of ideas" in page
    assert "the history was kept" in page
    assert re.search(r"failed after call \d+", text) and "the history was kept" in text


def test_no_secret_in_widget_state_or_bundle(session: Session):
    log = follow(session)
    meter = ContextMeter(session, log=log, scope="cell")
    session.ask(f"My key is {SECRET}; survey the project.")
    session.compact(f"keep {SECRET} in mind")
    everything = json.dumps(meter.get_state(), default=str)
    everything += json.dumps(meter._view.get_state(), default=str)
    everything += json.dumps(meter._repr_mimebundle_(), default=str)
    everything += json.dumps(meter.finish()) + json.dumps(static_meter(session, log))
    assert SECRET not in everything
    # not even a piece of it, cut where a tooltip clips the request
    assert SECRET[:16] not in everything


def test_clip_cuts_on_a_word_with_an_ellipsis():
    text = "Goal: survey the inventory module and its tests before changing anything at all"
    cut = clip(text, 40)
    assert len(cut) <= 40 and cut.endswith("…")
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "
    assert clip("short enough", 40) == "short enough"
    assert clip("x" * 50, 10) == "x" * 9 + "…"  # one long word: cut inside it, still marked
    assert clip("line one\nline two words", 15, one_line=False) == "line one\nline…"


def test_live_option_belongs_to_agent_context_only():
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()
    shell.run_line_magic("load_ext", "evo_magic")
    try:
        with pytest.raises(UsageError, match="--live is for %agent context only"):
            shell.run_line_magic("agent", "history --live")
    finally:
        shell.run_line_magic("unload_ext", "evo_magic")


# -- a long session -----------------------------------------------------------------------------


def reader(request) -> list[dict]:
    """A model that reads the sample data once per request, then answers (and summarises)."""
    if not request.tools:
        return [{"type": "text", "text": "Summary: the data file was read."}]
    last = request.messages[-1]["content"]
    if isinstance(last, list) and last[0].get("type") == "tool_result":
        return [{"type": "text", "text": "Read it."}]
    tool = {"type": "tool_use", "id": "", "name": "read_file", "input": {"path": "samples.csv"}}
    tool["id"] = f"toolu_read_{len(request.messages):04d}_{id(request) % 10_000:04d}"
    return [tool]


def test_a_long_sessions_meters_stay_small_and_complete(new_session):
    session = new_session(model=FunctionModel(reader), policy=CompactPolicy(context_limit=40_000))
    log = follow(session)
    for n in range(160):
        session.ask(f"Read the data file again ({n}).")
    (cell,) = run_cells(session, log, "Once more.")
    assert len(log.calls) > 300
    whole = static_meter(session, log)["text/html"]
    assert len(cell.finish()["text/html"]) < 60_000
    listed = re.findall(
        r"<details class='evo-compaction' data-kind='full'.*?</details>", whole, re.S
    )
    assert len(whole) - sum(map(len, listed)) < 150_000  # all but the full compactions: bounded
    plot = chart(whole)
    columns = by_class(plot, "evo-point")
    assert len(columns) <= MAX_COLUMNS
    first = columns[0].get("data-call")
    last = columns[-1].get("data-last-call") or columns[-1].get("data-call")
    assert (int(first), int(last)) == (log.calls[0].call, log.calls[-1].call)
    marks = by_class(plot, "evo-mark")
    micro = sum(int(m.get("data-count")) for m in marks if m.get("data-kind") == "micro")
    assert micro == len([row for row in log.compactions if row.micro]) > 100
    full = [row for row in log.compactions if not row.micro]
    assert len([m for m in marks if m.get("data-kind") == "full"]) == len(full) > 0
    assert whole.count("data-kind='full' data-label") >= 2 * len(full)  # mark and list row
    assert "class='evo-earlier'" in whole  # old asks' micro-compactions summed up
    window = by_class(chart(cell._view.value), "evo-point")
    assert len(window) == CONTEXT_CALLS + len(cell.get_state()["calls"])


class CountedMeter(ContextMeter):
    """The live meter, counting its refreshes (each redraws the whole meter)."""

    refreshes = 0

    def refresh(self, whole: bool = True) -> None:
        self.refreshes += 1
        super().refresh(whole)


def test_micro_compactions_do_not_each_redraw_the_live_meter(new_session, monkeypatch):
    """A micro-compaction can come with every call: the meter refreshes at its throttled pace
    for them (and at once for a full compaction or the end of an ask), not once each."""
    from evo_magic.events import MicroCompacted
    from evo_magic.notebook import widget
    from evo_magic.strategies import MicroCompact

    monkeypatch.setattr(widget, "REFRESH_SECONDS", 3_600.0)  # no throttled refresh falls due

    def model(request):
        n = len(request.messages)
        if n > 120:
            return [{"type": "text", "text": "done"}]
        return [{"type": "tool_use", "id": f"toolu_{n:05d}", "name": "bash",
                 "input": {"command": "printf 'line of output %.0s' $(seq 1 40)"}}]  # fmt: skip

    session = new_session(
        model=FunctionModel(model),
        strategies=[MicroCompact(keep_recent=1, min_chars=10, cache_aware=False)],
        max_turns=10**6,
    )
    log = follow(session)
    micro: list[Event] = []
    log.listen(lambda event: micro.append(event) if isinstance(event, MicroCompacted) else None)
    meter = CountedMeter(session, log=log)
    meter.refreshes = 0
    session.ask("Run the command until the history is long.")
    assert len(micro) >= 40  # the strategy cleared an old result on almost every call
    assert meter.refreshes == 0  # none fell due: no micro-compaction redrew it on its own
    meter.close()


def test_a_live_refresh_leaves_the_earlier_rows_as_they_are(session: Session):
    """A refresh while an ask runs adds the new rows to the synced lists in place: it neither
    copies nor checks the earlier rows (it set new lists, every row checked: a refresh at
    10,000 calls took some 70 ms, 25x one at 1,000)."""
    from evo_magic.events import ContextSize
    from evo_magic.meter.log import CallPoint

    log = MeterLog()

    def call(n: int) -> None:
        size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)
        log.calls.append(CallPoint(n, 1, size, size, None, 0.001, ("tool results",)))

    for n in range(1, 3_001):
        call(n)
    meter = ContextMeter(session, log=log)
    held, changes = meter.calls, []
    meter.observe(changes.append, names=["sizes", "calls", "compactions"])
    call(3_001)
    meter.refresh(whole=False)
    assert meter.calls is held and [c["call"] for c in held[-2:]] == [3_000, 3_001]
    assert changes == []  # no list was set again (a set checks every row)
    assert meter.get_state()["model_calls"] == len(meter.get_state()["calls"]) == 3_001
    meter.close()
