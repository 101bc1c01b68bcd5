"""Where the cache breakpoints of a request go: `CacheSettings` (on or off, the TTLs) and
`place_breakpoints`, which marks a request with ``cache_control`` by the rules of the
prompt-caching documentation (listed in `evo_magic.prompt_cache`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any, overload

from evo_magic.catalog import min_cacheable_tokens
from evo_magic.measure import estimate_tokens as estimate_chars_tokens
from evo_magic.measure import to_json

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# When the model is unknown, placement assumes the most common minimum.
DEFAULT_MIN_CACHEABLE_TOKENS = 1024


@dataclass(frozen=True)
class CacheSettings:
    """How requests are cached.

    ``ttl`` applies to the conversation breakpoints and, unless ``static_ttl`` says otherwise,
    to the tools and system breakpoints. ``static_ttl="1h"`` with ``ttl="5m"`` keeps the fixed
    part warm across idle spells for the 1-hour write price; the reverse (a 5-minute static
    part before a 1-hour conversation) is what the API rejects, so it raises ValueError here.
    """

    enabled: bool = True
    ttl: str = "5m"
    static_ttl: str | None = None

    def __post_init__(self) -> None:
        for name in ("ttl", "static_ttl"):
            value = getattr(self, name)
            if value is not None and value not in TTL_SECONDS:
                raise ValueError(f"cache {name} must be '5m' or '1h', not {value!r}")
        if self.prefix_ttl == "5m" and self.ttl == "1h":
            raise ValueError(
                "a 1-hour conversation cache cannot follow a 5-minute tools/system cache "
                "(the API requires 1-hour breakpoints before 5-minute ones)"
            )

    @property
    def prefix_ttl(self) -> str:
        """The TTL of the tools and system breakpoints."""
        return self.static_ttl or self.ttl


@dataclass(frozen=True)
class Spot:
    """Where a breakpoint went: ``section`` index and, in a message, the content block."""

    section: str
    """"tools", "system" or "messages"."""
    index: int
    """The tool, the system block, or the message."""
    block: int | None
    """The content block within the message; None for tools and system."""
    ttl: str


@dataclass(frozen=True)
class PlacedRequest:
    """Request parameters with their cache breakpoints, and where those are."""

    params: dict[str, Any]
    """``messages``, plus ``system`` and ``tools`` when given: ready to pass to the SDK."""
    breakpoints: tuple[Spot, ...]


class MarkedMessages(Sequence[dict[str, Any]]):
    """The messages of a request read through, with the (at most two) marked ones swapped in
    and unmarked messages after them (a turn note): what a request sends, without a copy of
    the history's list. Read-only; the SDK sends it as a list (`list(...)` makes one)."""

    __slots__ = ("_base", "_marked", "_after")

    def __init__(
        self,
        base: Sequence[dict[str, Any]],
        marked: Mapping[int, dict[str, Any]],
        after: Sequence[dict[str, Any]] = (),
    ):
        self._base = base
        self._marked = dict(marked)
        self._after = tuple(after)

    def followed_by(self, *messages: dict[str, Any]) -> MarkedMessages:
        """These messages with `messages` after them (unmarked), still without a copy."""
        return MarkedMessages(self._base, self._marked, (*self._after, *messages))

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        if index >= len(self._base):
            return self._after[index - len(self._base)]
        return self._marked.get(index, self._base[index])

    def __len__(self) -> int:
        return len(self._base) + len(self._after)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Runs of the base between the marked messages, each read at C speed (no copy).
        parts: list[Any] = []
        start = 0
        for index in sorted(self._marked):
            parts += [islice(self._base, start, index), (self._marked[index],)]
            start = index + 1
        parts += [islice(self._base, start, None), self._after]
        return chain.from_iterable(parts)

    def __repr__(self) -> str:
        return f"<{len(self)} messages, {len(self._marked)} marked>"


def place_breakpoints(
    messages: Sequence[dict[str, Any]],
    *,
    system: str | Sequence[dict[str, Any]] = "",
    tools: Sequence[dict[str, Any]] = (),
    settings: CacheSettings | None = None,
    model: str | None = None,
    edited_from: int | None = None,
    mark_newest: bool = True,
    copy: bool = True,
) -> PlacedRequest:
    """``system``, ``tools`` and ``messages`` marked for caching; the arguments are not mutated.

    The breakpoints (at most 4, all with the settings' TTLs):

    - the end of the system prompt (or of the tools when there is no system prompt): the fixed
      part is read from the cache even when the conversation changed (after a compaction);
    - the last tool too, when there is a system prompt and the tools alone reach the model's
      minimum cacheable length (estimated), so a changed system prompt keeps the tools cached;
    - the newest message's last block that may carry a breakpoint: writes the whole
      conversation for the next call (not with ``mark_newest=False``: a request whose prompt
      is never sent again, such as a summary, reads what earlier calls wrote and writes
      nothing, its new tail billed as input instead of written at a premium);
    - the same in the message that ended the previous call (three messages back: the loop adds
      an assistant reply and a user message per call). It reads exactly what that call wrote,
      however many blocks the last turn added (the API's lookback only spans 20 blocks);
    - or, when ``edited_from`` says that message was changed in place since the previous call
      (a micro-compaction) and it comes before that call's end, the edited message instead:
      the previous call's entries are gone, and an entry there is what the next request reads
      when the next edit comes later in the history (every clearing strategy moves forward),
      so each clearing rewrites the conversation from the previous edit on, not all of it.

    Thinking blocks and empty text blocks are never marked (the API rejects that): the breakpoint
    goes to the nearest earlier block that may carry one. A string system prompt or message
    content becomes one text block, which the API treats the same.

    Only what changes is copied: the marked system blocks and tools, the (at most two) marked
    messages with their content lists, and (unless ``copy=False``) the list of message
    references (a C-level copy; no message is visited beyond the marked ones). With
    ``copy=False``, ``params["messages"]`` is a `MarkedMessages` over ``messages`` instead of a
    list: the same messages, sent the same by the SDK, built at the same cost at any length
    (``messages`` must not change while it is in use). The messages must not carry
    ``cache_control`` of their own (the history keeps them unmarked), as those are not scanned
    for. Markers already in ``system`` or ``tools`` are replaced by this placement. With
    caching disabled, the request carries no breakpoint: markers in ``system`` and ``tools``
    are dropped and the messages are passed on as given (read through, with ``copy=False``).
    """
    settings = settings or CacheSettings()
    new_tools = list(tools)
    new_system: str | list[dict[str, Any]] = system if isinstance(system, str) else list(system)
    _strip_markers(new_tools)
    if not isinstance(new_system, str):
        _strip_markers(new_system)
    if not settings.enabled:
        given = messages if copy else MarkedMessages(messages, {})
        return PlacedRequest(_params(given, new_system, new_tools), ())
    spots: list[Spot] = []
    static_control = _control(settings.prefix_ttl)
    marked_system = _mark_system(new_system, static_control)
    if marked_system is not None:
        new_system, index = marked_system
        if new_tools and _tools_worth_a_breakpoint(new_tools, model):
            new_tools[-1] = {**new_tools[-1], "cache_control": static_control}
            spots.append(Spot("tools", len(new_tools) - 1, None, settings.prefix_ttl))
        spots.append(Spot("system", index, None, settings.prefix_ttl))
    elif new_tools:
        new_tools[-1] = {**new_tools[-1], "cache_control": static_control}
        spots.append(Spot("tools", len(new_tools) - 1, None, settings.prefix_ttl))
    control = _control(settings.ttl)
    marked = {}
    for spot in _conversation_spots(messages, settings.ttl, edited_from, mark_newest):
        marked[spot.index] = _marked_message(messages[spot.index], spot.block, control)
        spots.append(spot)
    spots.sort(key=_prompt_order)
    new_messages: Sequence[dict[str, Any]] = MarkedMessages(messages, marked)
    if copy:
        new_messages = list(messages)
        for index, message in marked.items():
            new_messages[index] = message
    return PlacedRequest(_params(new_messages, new_system, new_tools), tuple(spots))


def _params(messages: Any, system: Any, tools: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"messages": messages}
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
    return params


def _control(ttl: str) -> dict[str, str]:
    # The 5-minute TTL is the API's default: leave it implicit, as most clients send it.
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def _strip_markers(blocks: list[dict[str, Any]]) -> None:
    """Drop ``cache_control`` from the items of ``blocks`` (a fresh list), copying only those."""
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and "cache_control" in block:
            blocks[i] = {key: value for key, value in block.items() if key != "cache_control"}


def _mark_system(
    system: str | list[dict[str, Any]], control: dict[str, str]
) -> tuple[list[dict[str, Any]], int] | None:
    if isinstance(system, str):
        if not system.strip():
            return None
        return [{"type": "text", "text": system, "cache_control": control}], 0
    for i in range(len(system) - 1, -1, -1):
        if _may_carry_breakpoint(system[i]):
            system[i] = {**system[i], "cache_control": control}
            return system, i
    return None


def _tools_worth_a_breakpoint(tools: list[dict[str, Any]], model: str | None) -> bool:
    minimum = min_cacheable_tokens(model) if model else None
    return estimate_tokens(tools) >= (minimum or DEFAULT_MIN_CACHEABLE_TOKENS)


def _conversation_spots(
    messages: Sequence[dict[str, Any]], ttl: str, edited_from: int | None, mark_newest: bool
) -> list[Spot]:
    """The newest message's breakpoint (unless not `mark_newest`) and, before it, the previous
    call's end (or the message edited since, when that comes first)."""
    spots: list[Spot] = []
    newest = _last_markable(messages, len(messages) - 1)
    if newest is None:
        return spots
    before = min(newest[0] - 1, len(messages) - 3)
    if edited_from is not None and 0 <= edited_from < before:
        before = edited_from
    previous = _last_markable(messages, before)
    if previous is not None:
        spots.append(Spot("messages", previous[0], previous[1], ttl))
    if mark_newest:
        spots.append(Spot("messages", newest[0], newest[1], ttl))
    return spots


def _last_markable(messages: Sequence[dict[str, Any]], start: int) -> tuple[int, int] | None:
    """(message, block) of the last block at or before message ``start`` that may be marked.

    The walk back is bounded by the lookback window: a breakpoint further back would not help.
    """
    for i in range(start, max(-1, start - LOOKBACK_BLOCKS), -1):
        content = messages[i].get("content")
        if isinstance(content, str):
            if content.strip():
                return i, 0
            continue
        if not isinstance(content, list):
            continue
        for j in range(len(content) - 1, -1, -1):
            if _may_carry_breakpoint(content[j]):
                return i, j
    return None


def _may_carry_breakpoint(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in UNCACHEABLE_BLOCKS:
        return False
    if block.get("type") == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


def _marked_message(message: dict[str, Any], block: int | None, control: dict[str, str]) -> dict:
    content = message["content"]
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content, "cache_control": control}]}
    new_content = list(content)
    index = 0 if block is None else block
    new_content[index] = {**content[index], "cache_control": control}
    return {**message, "content": new_content}


_SECTION_ORDER = {"tools": 0, "system": 1, "messages": 2}


def _prompt_order(spot: Spot) -> tuple[int, int, int]:
    return (_SECTION_ORDER[spot.section], spot.index, spot.block or 0)


def estimate_tokens(value: Any) -> int:
    """A rough token count of `value`: its compact JSON's characters as `measure.estimate_tokens`
    counts them (the project's one estimate)."""
    return estimate_chars_tokens(len(to_json(value)))
