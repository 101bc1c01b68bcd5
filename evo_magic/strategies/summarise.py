"""Summarise: the seed's layer 2 (and, on request, layer 3). The whole history becomes one
user message holding a summary.

Source: the evo-agent article's full compaction: one summarisation call (no tools, 2,000
max tokens) that keeps the goal, findings and decisions, files, remaining work and user
constraints, plus the focus; the new history is a line saying it was compacted, the summary,
`Focus to preserve next: ...`, the recent files to reopen, and (evo_magic's addition) the
user's unanswered request verbatim. The summariser sees the head and the newest turns of a
conversation longer than its input limit.

Two options keep more than the summary (both off by default: then the result is the seed's,
byte for byte):

- `keep_user_tokens=N` (Codex's rule, openai/codex `codex-rs/core/src/compact.rs`, 20,000
  there): the newest prompts a person typed (not tool results, not a compacted summary, not
  the project's own notes), verbatim, as many as fit in N tokens, newest first, each its own
  user message after the summary, oldest first. Codex cuts the prompt that crosses the budget
  and keeps its start; here a prompt is kept whole or not at all. The unanswered request is
  carried whatever the budget (the seed's rule) and does not count.
- `reread_files=K` (Claude Code's "what survives compaction": up to 5 recent files, whole
  under 5,000 tokens, else the path): the K most recently touched files are read again after
  the summary, through the file tools' confinement (never outside the workspace), and put back
  whole when they hold at most `reread_max_tokens` tokens; the others (too long, gone,
  unreadable, or no workspace to read from, as in a replay) stay listed by path.

With either on, the unanswered request moves to a user message of its own at the end (the
seed's wording), so that it is still the last thing the model reads. What was kept is recorded
with the compaction (`CompactionFinished.details`): the prompts kept and their tokens, each file
re-read or listed with its tokens and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Message
from evo_magic.compacted import (
    COMPACTED_HEADER,
    REMINDER_PREFIX,
    REQUEST_HEADER,
    REREAD_HEADER,
    compacted_message,
    is_pin_text,
)
from evo_magic.declared import check_fields, setting
from evo_magic.measure import to_json
from evo_magic.messages import content_blocks
from evo_magic.strategies.params import share, when_parameter


@dataclass(frozen=True)
class Summarise:
    """Replace the whole history by the seed's compacted message. `when` may be
    "on_request" to summarise only when asked (the model's compact tool, `%compact`).
    `keep_user_tokens` and `reread_files` keep the newest prompts and recent files after the
    summary (see the module)."""

    when: str = when_parameter()
    keep_user_tokens: int = setting(
        0, "Tokens of the newest prompts a person typed kept verbatim (0: none).", minimum=0
    )
    reread_files: int = setting(
        0, "Most recently touched files read again after the summary (0: none).", minimum=0
    )
    reread_max_tokens: int = setting(
        5_000,
        "A file read again is put back whole up to this many tokens, else listed by path.",
        minimum=0,
    )

    background_at: float | None = setting(
        None,
        "Prepare the summary in the background once the context passes this share of the "
        "limit; swapped in at the limit while it still covers the history (None: off).",
        check=lambda value: value if value is None else share(value),
        rule="None or a share between 0 and 1",
    )

    name = "summarise"
    source = "evo-agent's layer 2 (and 3, on request)"

    def __post_init__(self) -> None:
        check_fields(self, self.name)
        if self.background_at is not None and (self.keep_user_tokens or self.reread_files):
            raise ValueError(
                "summarise: background_at cannot be combined with keep_user_tokens or "
                "reread_files (the messages since the prepared summary are kept instead)"
            )

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message]:
        if self.background_at is not None:
            swapped = self._swapped(messages, ctx)
            ctx.details["background"] = "swapped" if swapped else "recomputed"
            if swapped is not None:
                return swapped
        summary = ctx.summarise(messages, ctx.focus)
        if not self.keep_user_tokens and not self.reread_files:
            return [ctx.compacted_message(summary)]
        blocks, listed = self._reread(ctx)
        pending = ctx.pending_request
        pending = pending if pending and pending.strip() else None
        head = ctx.with_pins([compacted_message(summary, ctx.focus, listed, None)])[0]
        head["content"] += blocks
        kept = self._kept_prompts(messages, ctx, pending)
        new = [head, *({"role": "user", "content": [_text(p)]} for p in kept)]
        if pending:
            new.append({"role": "user", "content": [_text(f"{REQUEST_HEADER}\n{pending}")]})
        return new

    def _swapped(self, messages: Sequence[Message], ctx: Context) -> list[Message] | None:
        """The summary prepared in the background for the messages it covers, then the
        messages since, verbatim; None when there is none that still covers the history (or
        the messages since would not open on the model's turn)."""
        prepared = ctx.prepared_summary(messages)
        if prepared is None:
            return None
        summary, covered = prepared
        since = list(messages[covered:])
        if since and since[0].get("role") != "assistant":
            ctx.summaries.pop()  # not used: its cost still counts (`compact.background`)
            return None
        ctx.details["background_covered"] = covered
        if any(prompt_text(m) is not None for m in since):  # the pending request is there
            head = ctx.with_pins([compacted_message(summary, ctx.focus, ctx.recent_files, None)])
            return [*head, *since]
        return [ctx.compacted_message(summary), *since]

    def _kept_prompts(
        self, messages: Sequence[Message], ctx: Context, pending: str | None
    ) -> list[str]:
        """The newest prompts (the pending request apart) that fit in `keep_user_tokens`."""
        if not self.keep_user_tokens:
            return []
        prompts = [p for p in map(prompt_text, messages) if p is not None]
        if pending and prompts and prompts[-1] == pending:
            prompts.pop()  # carried as the pending request, whatever the budget
        kept: list[str] = []
        left = self.keep_user_tokens
        for prompt in reversed(prompts):
            tokens = ctx.tokens_of_chars(len(to_json({"role": "user", "content": [_text(prompt)]})))
            if tokens > left:
                break
            kept.append(prompt)
            left -= tokens
        kept.reverse()
        ctx.details["kept_prompts"] = len(kept)
        ctx.details["kept_prompt_tokens"] = self.keep_user_tokens - left
        return kept

    def _reread(self, ctx: Context) -> tuple[list[dict[str, Any]], list[str]]:
        """Blocks of the files put back whole, and the recent files left listed by path."""
        if not self.reread_files:
            return [], list(ctx.recent_files)
        chosen = list(ctx.recent_files)[-self.reread_files :]
        max_chars = int(self.reread_max_tokens / max(ctx.tokens_per_char, 1e-9))
        blocks, records, whole = [], [], set()
        for path in reversed(chosen):  # the newest first
            record: dict[str, Any] = {"path": path, "whole": False, "tokens": None}
            try:
                text = ctx.read_file(path, max_chars)
            except Exception as exc:  # gone, outside, binary, no workspace: listed by path
                record["why"] = str(exc) or type(exc).__name__
            else:
                block = _text(f"{REREAD_HEADER}{path}\n{text}") if text is not None else None
                tokens = ctx.tokens_of_chars(len(to_json(block))) if block else None
                record["tokens"] = tokens
                if block is not None and tokens is not None and tokens <= self.reread_max_tokens:
                    record["whole"] = True
                    blocks.append(block)
                    whole.add(path)
                else:
                    record["why"] = f"over {self.reread_max_tokens:,} tokens"
            records.append(record)
        ctx.details["reread_files"] = records
        ctx.details["reread_tokens"] = sum(r["tokens"] for r in records if r["whole"])
        blocks.reverse()  # oldest first, as the list of recent files
        return blocks, [path for path in ctx.recent_files if path not in whole]


def prompt_text(message: Message) -> str | None:
    """What a person typed in `message`, or None when it holds none: tool results, a
    compacted summary, the assistant's turn. The project's own notes in it (budget reminders,
    re-read files) are left out; a request carried over a compaction is read without its
    header."""
    if message.get("role") != "user":
        return None
    blocks = content_blocks(message)
    if any(b.get("type") == "tool_result" for b in blocks):
        return None
    texts = [
        b["text"]
        for b in blocks
        if b.get("type") == "text"
        and isinstance(b.get("text"), str)
        and not b["text"].startswith((REMINDER_PREFIX, REREAD_HEADER))
        and not is_pin_text(b["text"])
    ]
    if not texts or texts[0].startswith(COMPACTED_HEADER):
        return None
    text = "\n".join(texts)
    return text.removeprefix(f"{REQUEST_HEADER}\n") if text.strip() else None


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
