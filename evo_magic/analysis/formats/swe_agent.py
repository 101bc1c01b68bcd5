"""SWE-agent trajectories (`<run>/<instance>.traj`) and mini-swe-agent's (`.traj.json`): one
JSON document per run of one task, read whole (see `documents`).

SWE-agent (0.x and 1.x) keeps `history`, the messages the model was sent, in order:

- `system` is a message of role `system` (`message_kind` "system"); a user message with
  `is_demo` is a `demonstration`; the first other user message is the `prompt`.
- Each assistant message that is not a demonstration is one model call and its response. Its
  tool calls (1.x function calling: `tool_calls`, OpenAI's shape; some files keep them as the
  text of a Python list, read as a literal) are `tool_use` blocks; without them (0.x), the
  step's `action` is one `tool_use` block (id `step-<n>`, named after the action's first word,
  input `{"command": action}`) and the text block is the `thought`.
- A `tool` message, or in 0.x the user message after an action, is the `tool_result` of that
  call (the observation).
- Calls carry no usage (the file has none per call: NA); the run's totals, `info.model_stats`
  (`tokens_sent`, `tokens_received`, `api_calls`, `instance_cost`), are an `events` row of
  kind `model_stats` with those columns. The model is `replay_config`'s when the file has one.

mini-swe-agent keeps `messages` (roles `system`, `user`, `assistant`, `tool`, `exit`) and
`info` (`model_stats`, `config`, `mini_version`): each assistant message is a call, with the
usage of its raw response when kept (`extra.response.usage`, OpenAI's counts: cached prompt
tokens are `cache_read_input_tokens`, the rest `input_tokens`), its model and its time
(`extra.timestamp`); its `tool_calls` are `tool_use` blocks and `tool` messages their results;
the `exit` message is an `events` row of kind `exit`.

A session is named `<folder>/<task>`: the run's folder and the file's name without its suffix.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from datetime import UTC, datetime
from typing import Any

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats import Part
from evo_magic.analysis.formats.documents import (
    Conversation,
    arguments,
    document,
    part,
    text_block,
    text_of,
)
from evo_magic.analysis.formats.registry import Format, Sniff

SOURCE = "swe_agent"
MINI_SOURCE = "mini_swe_agent"
MAX_LITERAL_CHARS = 1 << 20
"""The longest tool-call list read from the text of a Python list (a literal, never code)."""
_SWE_START = re.compile(rb'\s*\{\s*"(environment|trajectory|history)"\s*:')


def is_swe_agent(sniff: Sniff) -> bool:
    """A SWE-agent trajectory: a JSON object opening with `environment`, `trajectory` or
    `history`, with SWE-agent's steps or messages in its first bytes."""
    head = sniff.head
    if not _SWE_START.match(head) or b'"trajectory_format"' in head:
        return False
    return b'"role"' in head or b'"action"' in head or len(head) < 64


def is_mini_swe_agent(sniff: Sniff) -> bool:
    """A mini-swe-agent trajectory: a JSON object whose `info` has a `mini_version`, or whose
    `trajectory_format` (at its end) names mini-swe-agent."""
    head = sniff.head.lstrip()
    if not head.startswith(b"{"):
        return False
    if re.search(rb'"trajectory_format"\s*:\s*"mini-swe-agent', head + sniff.tail):
        return True
    return b'"mini_version"' in head and b'"messages"' in head + sniff.tail


def read(engine: Any, sources: list[Any]) -> Part:
    """The frames' rows of SWE-agent trajectories."""
    return _read(sources, _swe_agent)


def read_mini(engine: Any, sources: list[Any]) -> Part:
    """The frames' rows of mini-swe-agent trajectories."""
    return _read(sources, _mini)


def _read(sources: list[Any], one: Any) -> Part:
    conversations, records, skipped = [], 0, {}
    for source in sources:
        try:
            found, count = one(source)
        except TranscriptError as error:
            warnings.warn(f"{error}; skipped", TranscriptWarning, stacklevel=6)
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        conversations.append(found)
        records += count
    return part(conversations, records, skipped=skipped)


def _session_id(source: Any) -> str:
    name = source.path.name
    for suffix in (".traj.json", ".traj", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    folder = source.path.parent
    if folder.name == name and folder.parent.name:  # mini: <run>/<task>/<task>.traj.json
        folder = folder.parent
    return f"{folder.name}/{name}" if folder.name else name


def _object(value: Any, source: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TranscriptError(f"{source.path}: {what} is not a JSON object")
    return value


def _list(value: Any, source: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TranscriptError(f"{source.path}: {what} is not a list")
    return value


# -- SWE-agent ---------------------------------------------------------------------------------


def _swe_agent(source: Any) -> tuple[Conversation, int]:
    run = _object(document(source), source, "the trajectory")
    history = _list(run.get("history"), source, "`history`")
    info = run.get("info") if isinstance(run.get("info"), dict) else {}
    c = Conversation(SOURCE, source, _session_id(source))
    model = _swe_model(run.get("replay_config"))
    pending: list[str] = []  # tool_use ids of the last action, answered by the next result
    prompted = False
    for n, message in enumerate(history):
        if not isinstance(message, dict):
            raise TranscriptError(f"{source.path}: history[{n}] is not a JSON object")
        role, content = message.get("role"), text_of(message.get("content")) or ""
        if role == "system":
            c.message("system", "system", [text_block(content)], seq=n)
        elif role == "assistant" and not message.get("is_demo"):
            blocks, pending = _swe_action(message, n)
            index = c.message("assistant", "response", blocks, seq=n)
            c.call(model, None, index, seq=n)
        elif role == "assistant":
            c.message("assistant", "demonstration", [text_block(content)], seq=n)
        elif role == "tool" or (role == "user" and pending and not message.get("is_demo")):
            ids = _ids(message.get("tool_call_ids")) or pending[:1]
            c.message("user", "tool_result", [_result(i, content) for i in ids], seq=n)
            pending = [i for i in pending if i not in ids]
        elif message.get("is_demo"):
            c.message("user", "demonstration", [text_block(content)], seq=n)
        else:
            kind = "meta" if prompted else "prompt"
            prompted = True
            c.message("user", kind, [text_block(content)], seq=n)
        c.event(f"history.{role}", seq=n)
    stats = info.get("model_stats")
    if isinstance(stats, dict):
        c.event("model_stats", seq=len(history), **_stats(stats))
    return c, len(history) + 1


def _swe_model(config: Any) -> str | None:
    """The model named in a 1.x `replay_config` (an object, or its JSON text)."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def _swe_action(message: dict[str, Any], n: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The blocks of an assistant step, and the ids of its tool calls."""
    calls = _tool_calls(message.get("tool_calls"))
    thought = message.get("thought")
    content = text_of(message.get("content")) or ""
    if calls:
        blocks = [text_block(content)] if content else []
        uses = [_use(call, f"call-{n}-{i}") for i, call in enumerate(calls)]
        return blocks + uses, [u["tool_use_id"] for u in uses]
    action = message.get("action")
    if not isinstance(action, str) or not action.strip():
        return [text_block(content)], []
    said = thought if isinstance(thought, str) and thought.strip() else content
    name = action.strip().split(None, 1)[0]
    use = {
        "block_type": "tool_use",
        "tool_name": name,
        "tool_use_id": f"step-{n}",
        "text": json.dumps({"command": action}, ensure_ascii=False),
    }
    return [text_block(said), use], [use["tool_use_id"]]


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """OpenAI-style tool calls: a list, or its text as JSON or as a Python literal (some
    files keep the list's `repr`); `ast.literal_eval` reads literals only, never code."""
    if isinstance(value, str) and value.lstrip().startswith("[") and len(value) < MAX_LITERAL_CHARS:
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return []
    return [call for call in value if isinstance(call, dict)] if isinstance(value, list) else []


def _ids(value: Any) -> list[str]:
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = ast.literal_eval(value) if len(value) < MAX_LITERAL_CHARS else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _use(call: dict[str, Any], fallback: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    call_id = call.get("id")
    return {
        "block_type": "tool_use",
        "tool_name": function.get("name") if isinstance(function.get("name"), str) else None,
        "tool_use_id": call_id if isinstance(call_id, str) and call_id else fallback,
        "text": arguments(function.get("arguments")),
    }


def _result(tool_use_id: str, text: str) -> dict[str, Any]:
    return {"block_type": "tool_result", "tool_use_id": tool_use_id, "text": text}


def _stats(stats: dict[str, Any]) -> dict[str, Any]:
    """The run's totals as `events` columns (numbers only; anything else is left out)."""
    kept = {}
    for name in ("tokens_sent", "tokens_received", "api_calls", "instance_cost", "total_cost"):
        value = stats.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            kept[name] = float(value) if name.endswith("cost") else int(value)
    return kept


# -- mini-swe-agent ----------------------------------------------------------------------------


def _mini(source: Any) -> tuple[Conversation, int]:
    run = document(source)
    if isinstance(run, list):  # an early layout: the messages alone
        run = {"messages": run}
    run = _object(run, source, "the trajectory")
    messages = _list(run.get("messages"), source, "`messages`")
    info = run.get("info") if isinstance(run.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model_config = config.get("model") if isinstance(config.get("model"), dict) else {}
    default_model = model_config.get("model_name")
    c = Conversation(MINI_SOURCE, source, _session_id(source))
    prompted = False
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TranscriptError(f"{source.path}: messages[{n}] is not a JSON object")
        role, content = message.get("role"), text_of(message.get("content")) or ""
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        stamp = _time(extra.get("timestamp"))
        if role == "system":
            c.message("system", "system", [text_block(content)], stamp, seq=n)
        elif role == "assistant":
            calls = _tool_calls(message.get("tool_calls"))
            blocks = ([text_block(content)] if content or not calls else []) + [
                _use(call, f"call-{n}-{i}") for i, call in enumerate(calls)
            ]
            index = c.message("assistant", "response", blocks, stamp, seq=n)
            response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
            model = response.get("model") if isinstance(response.get("model"), str) else None
            c.call(
                model or default_model, _openai_usage(response.get("usage")), index, stamp, seq=n
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            block = _result(call_id if isinstance(call_id, str) else f"result-{n}", content)
            c.message("user", "tool_result", [block], stamp, seq=n)
        elif role == "user":
            c.message("user", "meta" if prompted else "prompt", [text_block(content)], stamp, seq=n)
            prompted = True
        c.event(f"message.{role}", stamp, seq=n)
    stats = info.get("model_stats")
    if isinstance(stats, dict):
        c.event("model_stats", seq=len(messages), **_stats(stats))
    return c, len(messages) + 1


def _openai_usage(usage: Any) -> dict[str, Any] | None:
    """OpenAI-style usage as the frames count it: `prompt_tokens` includes the cached ones."""
    if not isinstance(usage, dict):
        return None
    prompt, cached = usage.get("prompt_tokens"), None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        cached = details.get("cached_tokens")
    reasoning = None
    output_details = usage.get("completion_tokens_details")
    if isinstance(output_details, dict):
        reasoning = output_details.get("reasoning_tokens")
    fresh = prompt
    if isinstance(prompt, int) and isinstance(cached, int) and 0 <= cached <= prompt:
        fresh = prompt - cached
    return {
        "input_tokens": fresh,
        "cache_read_input_tokens": cached if cached is not None else (0 if prompt else None),
        "output_tokens": usage.get("completion_tokens"),
        "reasoning_output_tokens": reasoning,
    }


def _time(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e11:
        return datetime.fromtimestamp(value, UTC)
    return None


FORMAT = Format(
    name=SOURCE,
    reads="SWE-agent trajectories (<run>/<instance>.traj), 0.x and 1.x: history messages, "
    "steps, info.model_stats totals",
    recognised_by="a JSON object opening with `environment`, `trajectory` or `history`, "
    "holding messages or steps",
    detect_hook=is_swe_agent,
    read_hook=read,
    suffixes=(".traj",),
)
"""The reader as registered (entry point `swe_agent` of the group `evo_magic.formats`)."""
MINI_FORMAT = Format(
    name=MINI_SOURCE,
    reads="mini-swe-agent trajectories (<run>/<instance>/<instance>.traj.json): messages, "
    "per-call usage of the raw responses, info.model_stats totals",
    recognised_by="a JSON object with `info.mini_version`, or `trajectory_format` "
    '"mini-swe-agent-…"',
    detect_hook=is_mini_swe_agent,
    read_hook=read_mini,
    suffixes=(".json",),
)
"""The reader as registered (entry point `mini_swe_agent` of the group `evo_magic.formats`)."""
