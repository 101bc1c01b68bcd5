"""Responders for the loopback fake: how it answers when no reply is queued."""

from __future__ import annotations

from collections.abc import Callable

from evo_magic.models import ModelRequest, OfflineModel
from support.fake_api import Reply


def offline_responder() -> Callable[[dict], Reply]:
    """A responder that answers like the offline model, so whole scripted sessions run through
    the real SDK and the fake's validation."""
    model = OfflineModel()

    def respond(body: dict) -> Reply:
        request = ModelRequest(
            messages=body["messages"],
            max_tokens=body["max_tokens"],
            system=body.get("system", "") if isinstance(body.get("system"), str) else "",
            tools=body.get("tools", []),
            tool_choice=body.get("tool_choice"),
        )
        reply = model.respond(request)
        return Reply(content=reply.content, stop_reason=reply.stop_reason or "end_turn")

    return respond
