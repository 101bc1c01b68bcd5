"""Which records of a Claude Code conversation are the conversation, in what order, and which
are on abandoned branches (see "Branches" in the package's docstring)."""

from __future__ import annotations

from typing import Any

from evo_magic.analysis.formats.claude_code.records import content


def active(messages: list[dict[str, Any]], by_uuid: dict[str, dict[str, Any]]) -> set[Any]:
    """The uuids of the conversation: the chain from its last message back to the root, with
    what hangs beside it but belongs to it."""
    return _with_parallel_calls(_chain(messages[-1], by_uuid), messages)


def _chain(last: dict[str, Any], by_uuid: dict[str, dict[str, Any]]) -> set[Any]:
    """The uuids from `last` back to the root, across compact boundaries."""
    found: set[Any] = set()
    record: dict[str, Any] | None = last
    while record is not None and record.get("uuid") not in found:
        found.add(record.get("uuid"))
        parent = record.get("parentUuid") or record.get("logicalParentUuid")
        record = by_uuid.get(parent) if parent else None
    return found


def _with_parallel_calls(active: set[Any], messages: list[dict[str, Any]]) -> set[Any]:
    """The chain `active` with what hangs beside it but belongs to it: the other records of a
    response on it (Claude Code writes each block of a response as a record, and with
    parallel tool calls parents a later tool_use on an earlier one's result, or on the
    previous block), and the results of its tool calls."""
    responses: set[Any] = set()
    used: set[Any] = set()
    while True:
        for record in messages:
            if record.get("uuid") in active and record.get("type") == "assistant":
                responses.add((record.get("message") or {}).get("id"))
                used.update(b.get("id") for b in content(record) if b.get("type") == "tool_use")
        grown = set(active)
        for record in messages:
            if record.get("uuid") in grown:
                continue
            if record.get("type") == "assistant":
                if (record.get("message") or {}).get("id") in responses - {None}:
                    grown.add(record.get("uuid"))
                continue
            ids = [b.get("tool_use_id") for b in content(record) if b.get("type") == "tool_result"]
            if ids and all(i in used for i in ids):
                grown.add(record.get("uuid"))
        if grown == active:
            return active
        active = grown


def responses_together(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` in file order, except that a record of a response written after the results
    of its earlier tool calls joins the response's other records, before those results: one
    response is one message (and one call), its tool results the message after it."""
    out: list[dict[str, Any]] = []
    last_at: dict[Any, int] = {}  # response id -> position of its last record in `out`
    for record in records:
        message = record.get("message") or {}
        response = message.get("id") if record.get("type") == "assistant" else None
        at = last_at.get(response) if response is not None else None
        if at is not None and at + 1 < len(out):
            tail = range(at + 1, len(out))
            if all(_is_result_or_aside(out[i]) for i in tail):
                # Only results and asides follow it, so no response's position moves.
                out.insert(at + 1, record)
                last_at[response] = at + 1
                continue
        if response is not None:
            last_at[response] = len(out)
        out.append(record)
    return out


def _is_result_or_aside(record: dict[str, Any]) -> bool:
    """A tool_result record, or a record that is no message (progress, snapshots, ...)."""
    if record.get("type") not in ("user", "assistant"):
        return True
    blocks = content(record)
    return (
        record.get("type") == "user"
        and bool(blocks)
        and all(b.get("type") == "tool_result" for b in blocks)
    )


def branch_numbers(
    records: list[dict[str, Any]], active: set[Any], by_uuid: dict[str, dict[str, Any]]
) -> dict[Any, int]:
    """uuid -> 0 for the conversation (and records not below it), or the number (1, 2, ...) of
    the abandoned branch it is on."""
    branch: dict[Any, int] = {}
    numbers: dict[Any, int] = {}

    def of(record: dict[str, Any]) -> int:
        uuid = record.get("uuid")
        if uuid is None or uuid in active:
            return 0
        if uuid in branch:
            return branch[uuid]
        branch[uuid] = 0  # guards against a cycle
        parent = by_uuid.get(record.get("parentUuid") or "")
        if parent is None:
            result = 0
        elif parent.get("uuid") in active:  # a fork: this record starts an abandoned branch
            result = numbers.setdefault(uuid, len(numbers) + 1)
        else:
            result = of(parent)
        branch[uuid] = result
        return result

    for record in records:
        of(record)
    return branch


def forks(
    records: list[dict[str, Any]], branches: dict[Any, int]
) -> dict[int, list[dict[str, Any]]]:
    """The records of each abandoned branch, by its number, in file order."""
    found: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        branch = branches.get(record.get("uuid"), 0)
        if branch:
            found.setdefault(branch, []).append(record)
    return found
