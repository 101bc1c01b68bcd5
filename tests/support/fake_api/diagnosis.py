"""The cache diagnosis beta (`cache-diagnosis-2026-04-07`) as the SDK 2.17 types define it: a
request's `diagnostics: {"previous_message_id": "msg_..." | null}` asks why its prompt could not
reuse the cached prefix of that earlier request; the response's `diagnostics` is
`{"cache_miss_reason": {"type": ..., "cache_missed_input_tokens": n}}`, or null when nothing
diverged (or no earlier request was named). The first difference in prompt order decides:
model, then system, then tools, then messages (an earlier entry changed, not only entries
appended); an id the fake never answered is `previous_message_not_found`."""

from __future__ import annotations

import json
import threading
from typing import Any

from support.fake_api.cache import estimate_input_tokens
from support.fake_api.script import unmarked

BETA = "cache-diagnosis-2026-04-07"


def check(body: dict, betas: set[str]) -> str | None:
    """None when the real API would accept the request's `diagnostics`, else why not."""
    if "diagnostics" not in body:
        return None
    if BETA not in betas:
        return "diagnostics: Extra inputs are not permitted"
    value = body["diagnostics"]
    if not isinstance(value, dict):
        return "diagnostics: Input should be a valid dictionary"
    extra = set(value) - {"previous_message_id"}
    if extra:
        return f"diagnostics.{sorted(extra)[0]}: Extra inputs are not permitted"
    previous = value.get("previous_message_id")
    if previous is not None and not isinstance(previous, str):
        return "diagnostics.previous_message_id: Input should be a valid string"
    return None


class Diagnoser:
    """The prompts the fake answered, by response id, and the diagnosis of a new one."""

    def __init__(self) -> None:
        self._prompts: dict[str, dict] = {}
        self._lock = threading.Lock()

    def remember(self, message_id: str, body: dict) -> None:
        with self._lock:
            self._prompts[message_id] = unmarked(body)

    def diagnose(self, body: dict) -> dict[str, Any] | None:
        """The response's `diagnostics` for `body` (None: not asked, or nothing diverged)."""
        asked = body.get("diagnostics")
        if not isinstance(asked, dict) or asked.get("previous_message_id") is None:
            return None
        with self._lock:
            previous = self._prompts.get(asked["previous_message_id"])
        if previous is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        now = unmarked(body)
        reason = _first_difference(previous, now)
        if reason is None:
            return None
        kept = _common_prefix(previous.get("messages") or [], now.get("messages") or [])
        matched = {**previous, "messages": previous["messages"][:kept]}
        if reason != "messages_changed":
            matched = {"model": previous.get("model"), "messages": []}
        missed = estimate_input_tokens(previous) - (
            estimate_input_tokens(matched) if matched["messages"] else 0
        )
        return {"cache_miss_reason": {"type": reason, "cache_missed_input_tokens": max(missed, 0)}}


def _first_difference(previous: dict, now: dict) -> str | None:
    for field, reason in (("model", "model_changed"), ("system", "system_changed")):
        if _same(previous.get(field)) != _same(now.get(field)):
            return reason
    if _same(previous.get("tools")) != _same(now.get("tools")):
        return "tools_changed"
    before, after = previous.get("messages") or [], now.get("messages") or []
    if _common_prefix(before, after) < len(before):
        return "messages_changed"
    return None


def _common_prefix(before: list, after: list) -> int:
    count = 0
    for old, new in zip(before, after, strict=False):
        if _same(old) != _same(new):
            break
        count += 1
    return count


def _same(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
