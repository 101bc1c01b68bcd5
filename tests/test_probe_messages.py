"""What a probe's request keeps of a rebuilt context's thinking: the same rule as every other
request builder (`evo_magic.messages.without_unsigned_thinking`), plus its own for redacted
thinking."""

from __future__ import annotations

from evo_magic.analysis.retention.probes import probe_messages
from evo_magic.messages import without_unsigned_thinking

SIGNED = {"type": "thinking", "thinking": "plan A", "signature": "c2ln"}
CONTEXT = [
    {"role": "user", "content": "fix the bug"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "no signature kept"},
            {"type": "thinking", "thinking": "empty signature", "signature": ""},
            SIGNED,
            {"type": "text", "text": "on it"},
        ],
    },
    {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "alone, unsigned"}]},
    {"role": "user", "content": [{"type": "text", "text": "and?"}]},
    {
        "role": "assistant",
        "content": [{"type": "redacted_thinking", "data": "ZW5j"}, {"type": "text", "text": "ok"}],
    },
]


def _thinking(messages):
    return [[b for b in m["content"] if b.get("type") == "thinking"] for m in messages]


def test_a_probe_keeps_signed_thinking_and_drops_the_rest():
    sent = probe_messages(CONTEXT, "Which plan?")
    assert sent[1]["content"] == [SIGNED, {"type": "text", "text": "on it"}]
    assert sent[3]["content"] == [{"type": "text", "text": "[thinking]"}]
    assert sent[5]["content"] == [{"type": "text", "text": "ok"}]  # redacted: probes' own rule


def test_a_probe_and_the_shared_rule_keep_the_same_thinking():
    # Fails if the probe's request builder grows its own idea of "unsigned" again.
    sent = probe_messages(CONTEXT, "Which plan?")
    shared = [
        {**m, "content": [{"type": "text", "text": m["content"]}]}
        if isinstance(m["content"], str)
        else m
        for m in without_unsigned_thinking(CONTEXT)
    ]
    assert _thinking(sent[: len(CONTEXT)]) == _thinking(shared)
    assert [m["content"] for m in sent[3:4]] == [m["content"] for m in shared[3:4]]
