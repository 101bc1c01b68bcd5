"""FunctionModel: a model made of one function, for tests and experiments without a server.

    def fn(request):
        if request.tools and not request.messages[-1]["content"][0].get("tool_use_id"):
            return [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]
        return [{"type": "text", "text": "done"}]

    session = Session(workspace, model=FunctionModel(fn))

`fn(request)` gets the `ModelRequest` (`.messages`, `.system`, `.tools`, `.max_tokens`) and
returns the assistant's content blocks (stop reason `tool_use` when one is a tool_use, else
`end_turn`), or a dict with `content` and optionally `stop_reason` and `usage` (the API's
usage fields). Without `usage`, tokens are estimated from the characters (four a token).
Equivalent to a server that answers every request with what `fn` returns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from evo_magic.measure import estimate_tokens, to_json
from evo_magic.models.base import ModelReply, ModelRequest, TextCallback
from evo_magic.usage import Usage

Answer = list[dict[str, Any]] | Mapping[str, Any]


class FunctionModel:
    """See the module docstring."""

    offline = False

    def __init__(self, fn: Callable[[ModelRequest], Answer], name: str = "function"):
        self.fn = fn
        self.name = name
        self.calls = 0

    def respond(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelReply:
        self.calls += 1
        answer = self.fn(request)
        if isinstance(answer, Mapping):
            content = answer.get("content", [])
            stop_reason = answer.get("stop_reason")
            usage = answer.get("usage")
        elif isinstance(answer, list):
            content, stop_reason, usage = answer, None, None
        else:
            raise TypeError(
                f"FunctionModel: fn must return a list of content blocks or a dict with "
                f"'content', got {type(answer).__name__}"
            )
        content = copy.deepcopy(list(content))
        if stop_reason is None:
            has_tools = any(block.get("type") == "tool_use" for block in content)
            stop_reason = "tool_use" if has_tools else "end_turn"
        for block in content:
            if block.get("type") == "text" and on_text is not None and block.get("text"):
                on_text(block["text"])
        return ModelReply(content, stop_reason, _usage(usage, request, content), self.name)


def _usage(usage: Any, request: ModelRequest, content: list[dict[str, Any]]) -> Usage:
    if isinstance(usage, Usage):
        return usage
    if isinstance(usage, Mapping):
        return Usage.from_api(usage)
    return Usage(
        input_tokens=estimate_tokens(request.measured_chars()),
        output_tokens=estimate_tokens(len(to_json(content))),
    )
