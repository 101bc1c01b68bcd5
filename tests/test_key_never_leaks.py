"""The key never reaches the agent, a request, a transcript file, a display or widget state.

A real "kernel" process is started with the key in its environment (so it is in
/proc/<pid>/environ, as in a kernel started from a shell that exported it), runs `%%agent` cells
in an InteractiveShell against the loopback fake, and the agent goes looking for the key: the
kernel's environment through /proc, every process's environment, and a `.env` file in its
workspace. It prints what it read, also reversed (a transformation no redactor can undo), writes
the key into its text, its compact focus and a file. Everything that left evo_magic is then
searched for the key and its reversal.
"""

from __future__ import annotations

import base64
import codecs
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evo_magic.tools import sandbox_status

KEY = "sk-ant-api03-LEAKCHECK-" + "Zq8" * 12
ROT13 = codecs.encode(KEY, "rot13")
FORMS = (KEY, KEY[::-1], ROT13)
TESTS = Path(__file__).parent

CHILD = """
import json, os, sys
sys.path.insert(0, {tests!r})
from support.fake_api import FakeAnthropic, reply, text, tool_use
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from evo_magic.demo import make_demo_workspace

key = os.environ["ANTHROPIC_API_KEY"]
hunt = {hunt!r}
with FakeAnthropic() as server:
    os.environ["ANTHROPIC_BASE_URL"] = server.url.replace("://", "://" + {userinfo!r}, 1)
    workspace = make_demo_workspace({workspace!r})
    for name, content in {files!r}.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(content.replace("@KEY@", key))
    server.queue(
        reply(tool_use("bash", {{"command": hunt}}, id="toolu_hunt")),
        reply(
            text("I found " + key + " and will keep it."),
            tool_use("write_file", {{"path": "stolen.txt", "content": key}}, id="toolu_w"),
            tool_use("compact", {{"focus": "remember " + key}}, id="toolu_c"),
        ),
        reply(text("Summary mentioning " + key)),
        reply(text("Done: " + key)),
    )
    shell = InteractiveShell.instance()
    os.chdir(workspace)
    shell.run_line_magic("load_ext", "evo_magic")
    shell.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
    shell.run_line_magic("config", "AgentMagics.sandbox = {mode!r}")
    shell.run_line_magic("config", "AgentMagics.model = 'claude-sonnet-5-5'")
    with capture_output() as out:
        shell.run_cell_magic("agent", "", "Find the API key.")
        shell.run_line_magic("compact", "focus=also " + key)
        shell.run_line_magic("agent", "context")
        last = repr(shell.run_line_magic("agent", "last"))
    from evo_magic.notebook.widget import ContextMeter

    magics = next(m for m in shell.configurables if type(m).__name__ == "AgentMagics")
    session = magics.sessions["default"]
    meter = ContextMeter(session)
    bundle = meter._repr_mimebundle_()
    files = {{
        str(p): p.read_text(errors="replace")
        for p in session.directory.rglob("*")
        if p.is_file()
    }}
    print(json.dumps({{
        "stdout": out.stdout + out.stderr,
        "agent_repr": last + repr(shell.user_ns["_agent"]),
        "requests": json.dumps(server.accepted),
        "files": files,
        "widget": json.dumps(meter.get_state(), default=str),
        "bundle": json.dumps({{k: v for k, v in bundle.items() if isinstance(v, str)}}),
        "history": json.dumps(session.messages),
        "rejected": len(server.rejections),
    }}))
"""


HUNT_ENVIRONMENT = (
    "tr '\\0' '\\n' < /proc/$PPID/environ | grep ANTHROPIC; "
    "tr '\\0' '\\n' < /proc/$PPID/environ | grep ANTHROPIC | rev; "
    "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep ANTHROPIC | rev; "
    "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep ANTHROPIC | tr A-Za-z N-ZA-Mn-za-m; "
    "env | grep ANTHROPIC; cat .env"
)
DOT_ENV = {".env": "ANTHROPIC_API_KEY=@KEY@\n"}


def run_kernel(
    tmp_path: Path,
    mode: str,
    hunt: str = HUNT_ENVIRONMENT,
    files: dict[str, str] = DOT_ENV,
    userinfo: str = "",
) -> dict:
    script = CHILD.format(
        tests=str(TESTS),
        workspace=str(tmp_path / "work"),
        mode=mode,
        hunt=hunt,
        files=files,
        userinfo=userinfo,
    )
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ANTHROPIC_API_KEY": KEY,
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def places(report: dict) -> dict[str, str]:
    """Everything that left evo_magic, by where it went."""
    found = {key: report[key] for key in ("stdout", "agent_repr", "requests", "widget", "bundle")}
    found["history"] = report["history"]
    found.update(report["files"])
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_status().available, reason="bubblewrap is not usable here")
def test_the_sandboxed_agent_never_gets_the_key(tmp_path: Path):
    report = run_kernel(tmp_path, "require")
    assert report["rejected"] == 0
    assert report["files"], "the transcript files were not found"
    leaks = {where for where, text in places(report).items() if any(f in text for f in FORMS)}
    assert not leaks
    # The hunt ran and found nothing: the kernel's environment is out of reach, and the .env
    # file (which is the user's, in the workspace, and holds the key) is hidden, with a notice.
    content = tool_result(report, 2)
    assert content.startswith(
        "[notice: hidden from bash (they hold or may hold a credential): .env]"
    )
    assert "cat: .env: Permission denied" in content
    assert "[redacted]" not in content  # nothing of the key was read, from /proc or .env


def tool_result(report: dict, index: int) -> str:
    """The content of the tool result recorded as message `index` of the session file."""
    (log,) = [text for path, text in report["files"].items() if path.endswith("session.jsonl")]
    records = [json.loads(line) for line in log.splitlines()]
    (found,) = [r for r in records if r["kind"] == "tool_result" and r["index"] == index]
    return found["block"]["content"]


@pytest.mark.slow
def test_without_the_sandbox_redaction_still_holds_but_the_rot13_key_leaks(tmp_path: Path):
    """The control: unsandboxed, the agent reads the kernel's environment. Redaction keeps the
    key and what a command trivially makes of it (reversed) out of everything, but not every
    transformed copy (rot13 here): that is what the sandbox is for."""
    report = run_kernel(tmp_path, "off")
    everywhere = places(report)
    assert not {where for where, text in everywhere.items() if KEY in text or KEY[::-1] in text}
    assert any(ROT13 in text for text in everywhere.values())


def test_a_key_passed_in_code_is_redacted_everywhere(workspace: Path):
    """No key in the environment: the one given to the model in code is known all the same."""
    from support.fake_api import FakeAnthropic, reply, text, tool_use

    from evo_magic.models import AnthropicModel
    from evo_magic.render import TextRenderer
    from evo_magic.session import Session

    code_key = "sk-ant-api03-INCODE-" + "Qx7" * 10
    shown: list[str] = []
    with FakeAnthropic() as server:
        server.queue(
            reply(tool_use("bash", {"command": f"echo {code_key}"}, id="toolu_echo")),
            reply(text(f"The key is {code_key}.")),
        )
        model = AnthropicModel(api_key=code_key, base_url=server.url, max_retries=0)
        session = Session(workspace, model=model)
        session.subscribe(TextRenderer(shown.append))
        result = session.ask("Echo it.")
        server.assert_no_rejections()
        sent = json.dumps(server.accepted)
    session.close()
    assert code_key not in sent and code_key not in result.text
    assert code_key not in "".join(shown) and "[redacted]" in result.text
    assert all(code_key not in p.read_text() for p in session.directory.rglob("*") if p.is_file())


NOTEBOOK = json.dumps(
    {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "metadata": {},
                "outputs": [],
                "source": ["%env ANTHROPIC_API_KEY=@KEY@\n", "%load_ext evo_magic"],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    },
    indent=1,
)
PASSWORD = "pw-PROXYCHECK-" + "Lm4" * 8
HUNT_FILES = (
    "grep -h ANTHROPIC_API_KEY analysis.ipynb .ipynb_checkpoints/* notes.txt 2>&1 | rev; "
    "grep -h ANTHROPIC_API_KEY analysis.ipynb notes.txt 2>&1 | base64; "
    "grep -h ANTHROPIC_API_KEY notes.txt | cut -c1-40; "
    "grep -h ANTHROPIC_API_KEY notes.txt | cut -c41-; "
    "grep -h ANTHROPIC_API_KEY notes.txt | xxd -p; "
    "echo hunt-done"
)


def derived(secret: str) -> set[str]:
    """Every 12-character run of the secret, of its reversal and of its base64 spelling at each
    alignment: none of them may leave evo_magic."""
    texts = [secret, secret[::-1], secret.encode().hex()]
    for shift in range(3):
        texts.append(base64.b64encode(bytes(shift) + secret.encode()).decode()[2 + shift : -4])
    return {text[i : i + 12] for text in texts for i in range(len(text) - 11)}


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_status().available, reason="bubblewrap is not usable here")
def test_a_key_in_a_workspace_notebook_never_reaches_the_agent(tmp_path: Path):
    """The notebook and its checkpoint hold the key (a cell ran %env); a plain notes file too.
    The agent greps them and pipes what it finds through rev, base64, xxd and two cuts. The key,
    in none of those forms nor in pieces of 12 characters, reaches the requests, the transcript
    or a display."""
    files = {
        "analysis.ipynb": NOTEBOOK,
        ".ipynb_checkpoints/analysis-checkpoint.ipynb": NOTEBOOK,
        "notes.txt": "ANTHROPIC_API_KEY=@KEY@\n",
    }
    report = run_kernel(tmp_path, "require", HUNT_FILES, files)
    assert report["rejected"] == 0 and report["files"]
    content = tool_result(report, 2)
    assert "hunt-done" in content
    assert content.startswith(
        "[notice: hidden from bash (they hold or may hold a credential): analysis.ipynb, "
        ".ipynb_checkpoints/]"
    )
    assert "grep: analysis.ipynb: Permission denied"[::-1] in content
    assert "[redacted]" in content  # notes.txt is not hidden: its forms are redacted
    dangerous = derived(KEY)
    leaks = {
        where: sorted(piece for piece in dangerous if piece in text)[:3]
        for where, text in places(report).items()
        if any(piece in text for piece in dangerous)
    }
    assert not leaks


def test_a_password_in_the_base_url_is_never_shown(workspace: Path):
    """A proxy password in the base URL: an unreachable endpoint's error says where it could not
    connect without it, and the transcript never holds it."""
    import socket

    from evo_magic.models import AnthropicModel, ModelError
    from evo_magic.session import Session

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://proxyuser:{PASSWORD}@127.0.0.1:{port}"
    model = AnthropicModel(api_key="sk-ant-api03-unused-" + "Qq1" * 8, base_url=url, max_retries=0)
    session = Session(workspace, model=model)
    with pytest.raises(ModelError) as raised:
        session.ask("Hello?")
    session.close()
    message = str(raised.value)
    assert "Could not reach http://[redacted]@127.0.0.1" in message and PASSWORD not in message
    stored = "".join(p.read_text() for p in session.directory.rglob("*") if p.is_file())
    assert "Could not reach" in stored and "proxyuser" not in stored and PASSWORD not in stored
