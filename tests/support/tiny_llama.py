"""A real llama.cpp server (`llama-server`) on loopback, serving a tiny llama written here.

No model hub is reachable, so the test makes its own GGUF with the `gguf` package: a one-layer
llama whose weights are set by hand (not trained, not random) so that its answers are fixed and
its reasons can be read off:

- its state is the last token of the prompt (the embedding goes straight to the output, the
  feed-forward weights are zero), plus one attention head that lights up a "seen" dimension
  when a `<tool_response>` token is anywhere in the prompt;
- the prompt ends with the chat template's `<|im_start|>assistant\\n`; after that newline it
  answers with one token that is a whole tool call in the Qwen3-Coder format llama.cpp parses
  (`bash` with `command` `ls`) when no tool result is in the prompt yet, else with the token
  `Done.`; either is followed by `<|im_end|>`, the end of its turn.

So the agent's first request is answered by a tool call and, once its result is back, by a
short text, and every later one by the text: the whole protocol (streaming, usage, tool_use and
tool_result shapes) goes through llama.cpp's own Anthropic Messages endpoint. A call takes a
fraction of a second once the server caches the prompt's prefix (the first, some 5,000 tokens
of system prompt and tools, a few seconds on an unoptimised build). It solves no task.
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVED_NAME = "tiny-llama"
"""The model name the server answers to (`--alias`)."""

TOOL_COMMAND = "ls"
TOOL_CALL = (
    "<tool_call>\n<function=bash>\n<parameter=command>\n"
    f"{TOOL_COMMAND}\n</parameter>\n</function>\n</tool_call>"
)
REPLY = "Done."

# A ChatML template in the Qwen3-Coder dialect (llama.cpp recognises it by its `<tool_call>`,
# `<function=` and `<parameter=` markers and parses tool calls in that shape).
CHAT_TEMPLATE = """\
{%- if messages[0].role == 'system' or tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}
{% endif %}{% if tools %}Tools: {{ tools | tojson }}
Call one as <tool_call>
<function=NAME>
<parameter=ARGUMENT>
VALUE
</parameter>
</function>
</tool_call>
{% endif %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'system' %}
{%- elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{% if m.content %}{{ m.content }}{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>
<function={{ c.function.name }}>
{% for name, value in c.function.arguments | items %}<parameter={{ name }}>
{{ value }}
</parameter>
{% endfor %}</function>
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

# The residual stream's dimensions.
_BIAS, _NEWLINE, _CALL, _TEXT, _FLAG, _SEEN = range(6)
_EMBED = 16
_HEADS = 2
_HEAD_DIM = _EMBED // _HEADS
_SIGNAL = _HEAD_DIM - 2  # the last rotary pair, turned by a negligible angle (see rope base)


@dataclass(frozen=True)
class _Vocab:
    tokens: list[str]
    kinds: list[int]

    def id(self, text: str) -> int:
        return self.tokens.index(text)


def _vocab() -> _Vocab:
    import gguf

    kind = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>"]
    kinds = [kind.UNKNOWN, kind.CONTROL, kind.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]  # any text tokenizes, byte by byte
    kinds += [kind.BYTE] * 256
    tokens += ["<|im_start|>", "<|im_end|>", "<tool_response>", TOOL_CALL, REPLY]
    kinds += [kind.CONTROL, kind.CONTROL, kind.USER_DEFINED, kind.USER_DEFINED, kind.NORMAL]
    return _Vocab(tokens, [int(k) for k in kinds])


def write_gguf(path: Path) -> Path:
    """Write the tiny llama (see the module docstring) to `path` and return it."""
    import gguf
    import numpy as np

    vocab = _vocab()
    n_vocab = len(vocab.tokens)
    newline, end = vocab.id("<0x0A>"), vocab.id("<|im_end|>")
    call, reply, flag = vocab.id(TOOL_CALL), vocab.id(REPLY), vocab.id("<tool_response>")

    embed = np.zeros((n_vocab, _EMBED), np.float32)
    embed[:, _BIAS] = 1.0  # every token: the query of the attention reads this
    for token, dim in ((newline, _NEWLINE), (call, _CALL), (reply, _TEXT), (flag, _FLAG)):
        embed[token, dim] = 1.0

    # Attention: every position's query meets a large key only at `<tool_response>`, whose
    # value writes about 1.0 into the "seen" dimension; elsewhere the values are zero.
    normed = math.sqrt(_EMBED / 2)  # RMS-normed size of a dimension of a two-hot embedding
    wq = np.zeros((_EMBED, _EMBED), np.float32)
    wk = np.zeros((_EMBED, _EMBED), np.float32)
    wv = np.zeros((_EMBED, _EMBED), np.float32)
    wo = np.zeros((_EMBED, _EMBED), np.float32)
    wq[_SIGNAL, _BIAS] = 5.0
    wk[_SIGNAL, _FLAG] = 5.0
    wv[_SIGNAL, _FLAG] = 1.0
    wo[_SEEN, _SIGNAL] = 1.0 / normed

    # Output: the next token from the last one (and, after the newline, from "seen").
    out = np.zeros((n_vocab, _EMBED), np.float32)
    out[call, _NEWLINE] = 30.0
    out[reply, _NEWLINE] = 15.0
    out[reply, _SEEN] = 30.0
    out[end, _CALL] = 30.0
    out[end, _TEXT] = 60.0

    ffn = 32
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(SERVED_NAME)
    writer.add_context_length(65536)
    writer.add_embedding_length(_EMBED)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(1)
    writer.add_head_count(_HEADS)
    writer.add_head_count_kv(_HEADS)
    writer.add_rope_dimension_count(_HEAD_DIM)
    writer.add_rope_freq_base(1e20)  # the signal's rotary pair turns by ~1e-15 rad a position
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types(vocab.kinds)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(end)
    writer.add_add_bos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    ones = np.ones(_EMBED, np.float32)
    writer.add_tensor("token_embd.weight", embed)
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", out)
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    writer.add_tensor("blk.0.attn_q.weight", wq)
    writer.add_tensor("blk.0.attn_k.weight", wk)
    writer.add_tensor("blk.0.attn_v.weight", wv)
    writer.add_tensor("blk.0.attn_output.weight", wo)
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", np.zeros((ffn, _EMBED), np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((ffn, _EMBED), np.float32))
    writer.add_tensor("blk.0.ffn_down.weight", np.zeros((_EMBED, ffn), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def server_binary() -> str | None:
    """The `llama-server` on PATH, or None."""
    return shutil.which("llama-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LlamaServer:
    url: str
    log: Path


@contextmanager
def llama_server(model: Path, log: Path, ready_s: float = 120.0) -> Iterator[LlamaServer]:
    """`llama-server` serving `model` as SERVED_NAME on a free loopback port, its output in
    `log`; stopped (and waited for) on exit."""
    binary = server_binary()
    if binary is None:
        raise RuntimeError("llama-server is not on PATH")
    port = _free_port()
    command = [
        binary,
        "--model", str(model),
        "--alias", SERVED_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--ctx-size", "65536",
        "--parallel", "1",
        "--threads", "1",
        "--jinja",
        "--no-webui",
        "--offline",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, process, log, ready_s)
            yield LlamaServer(url, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama-server exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"llama-server was not ready in {limit_s:.0f} s: see {log}")
