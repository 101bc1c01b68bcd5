"""The compact JSON of a recorded conversation's blocks, encoded once and shared by every run.

Replay runs one recorded conversation under several strategy settings (and a calibration pass
first). Each run's history measures every message it is given, and its prefix chain hashes
every block: the same recorded block was encoded once per run and per chain. `EncodedBlocks`
encodes each block of the recording once; a run asks it for a block's or a message's JSON and
gets the very text `to_json` makes. A block a strategy replaced (a new object) is not in it
and is encoded as it comes, so a run costs what it changed.

The memo is built once per conversation and never changes: entries are keyed by the identity
of blocks it holds on to, so no other object can share a key while it lives.

The runs also share the prefix keys they hash (`prefix_keys`): until a setting changes what it
sends, its conversation's keys are those of every other run that sent the same, so each key of
a conversation is hashed once for all its settings, however many never compact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from evo_magic.measure import to_json

_ROLES = {role: to_json(role) for role in ("user", "assistant", "system")}


@dataclass(frozen=True)
class EncodedBlocks:
    """The JSON of a fixed set of blocks, by identity (see the module docstring)."""

    known: Mapping[int, tuple[Any, str]]
    """id(block) -> (the block, its compact JSON)."""
    prefix_keys: dict[tuple[bytes, str, str], bytes] | None = field(default=None, compare=False)
    """(the previous prefix key, a role's JSON, a block's JSON) -> the key of the prefix that
    ends with that block: what `PrefixChain` hashed for any run of the conversation (None:
    nothing is shared, as live)."""

    @classmethod
    def of(cls, blocks: Iterable[Any]) -> EncodedBlocks:
        """The memo of `blocks` (each encoded once, however often it is listed)."""
        known: dict[int, tuple[Any, str]] = {}
        for block in blocks:
            if id(block) not in known:
                known[id(block)] = (block, to_json(block))
        return cls(MappingProxyType(known), {})

    def block(self, block: Any) -> str:
        """`to_json(block)`: the memo's text for a block it holds, else encoded now."""
        hit = self.known.get(id(block))
        return hit[1] if hit is not None and hit[0] is block else to_json(block)

    def unmarked(self, block: Any) -> str:
        """`to_json` of `block` without its `cache_control` (a marker is not content)."""
        if isinstance(block, dict) and "cache_control" in block:
            return to_json({key: value for key, value in block.items() if key != "cache_control"})
        return self.block(block)

    def message(self, message: Any) -> str:
        """`to_json(message)`: a `{"role", "content": [blocks]}` message is put together
        from its blocks' JSON (as the encoder joins a list); anything else is encoded."""
        if isinstance(message, dict) and len(message) == 2:
            keys = iter(message)
            content = message.get("content")
            if next(keys) == "role" and next(keys) == "content" and isinstance(content, list):
                blocks = ",".join(map(self.block, content))
                role = message["role"]
                role_json = _ROLES.get(role) if isinstance(role, str) else None
                role_json = role_json or to_json(role)
                return '{"role":' + role_json + ',"content":[' + blocks + "]}"
        return self.block(message)


PLAIN = EncodedBlocks(MappingProxyType({}))
"""The memo of no block: everything is encoded as it comes (the live loop's)."""
