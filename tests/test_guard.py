"""The bash guard: the destructive forms an agent slips into are refused, lookalikes run.

The refused forms are checked on the guard itself, never executed: were the guard to miss one,
running `kill -9 -1` or `rm -rf /.` to find out would be the accident it exists to prevent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.sandbox import sandbox_here

from evo_magic.tools import ToolContext, default_tools, run_tool
from evo_magic.tools.guard import refusal_reason

WORKSPACE = "/srv/work/project"
"""Where the refused forms are judged to start (a realistic workspace path)."""

ISSUE_FORMS = [
    "rm -rf /.",
    "\\rm -rf /",
    "'rm' -rf /",
    "cd / && rm -rf *",
    "timeout 5 sudo ls",
    "nice -n 5 sudo ls",
    "find / -delete",
    "kill -9 -1",
]

MORE_FORMS = [
    # quoting, paths and expansions of the target
    'rm -rf "/"',
    "rm -rf /usr/./",
    "rm -rf //",
    'rm -rf "$HOME"/',
    "rm -rf ${HOME}/*",
    "rm -rf ~/",
    "rm -rf -- /",
    "/bin/rm -rf /",
    "busybox rm -rf /",
    # relative targets that lead to the root or the home directory
    "cd; rm -rf .",
    "cd ~ && rm -rf *",
    "(cd /usr && rm -rf *)",
    "cd /srv/work/project && rm -rf ../../..",
    # wrappers and nesting
    "env FOO=1 sudo ls",
    "env -u HOME nohup sudo ls",
    "stdbuf -oL nice -5 sudo ls",
    "xargs -n 1 sudo rm",
    "time sudo ls",
    "command sudo ls",
    "/usr/bin/sudo ls",
    '"sudo" ls',
    "$'\\x73udo' ls",
    "doas ls",
    "! sudo ls",
    "if true; then sudo x; fi",
    "for f in a; do sudo rm $f; done",
    "x=$(sudo ls)",
    "echo `sudo ls`",
    "ls\nsudo x",
    "bash -c 'sudo ls'",
    "sh -ec 'rm -rf /'",
    "bash -o pipefail -lc 'reboot'",
    "eval 'sudo ls'",
    "env -S 'sudo ls'",
    "flock /tmp/l -c 'sudo ls'",
    # find and kill
    "find / -exec rm -rf {} +",
    "find ~ -type f -delete",
    "find . -exec sudo rm {} \\;",
    "kill -- -1",
    "kill -s KILL -1",
    "kill -KILL -- -1",
    # the rest of the list
    "systemctl reboot",
    "systemctl -i poweroff",
    "init 0",
    "mke2fs /dev/sdb",
    "dd of=/dev/nvme0n1 if=x",
    "echo x >> /dev/sdb",
    "chown -R me /",
    "chmod --recursive 000 ~",
    "function f { f | f & }; f",
]

LOOKALIKES = [
    "git commit -m 'fix; sudo make docs'",
    'git commit -m "cd / && rm -rf *"',
    "echo ';' sudo",
    "echo sudo reboot",
    "echo rm -rf /",
    "grep -r sudo /etc",
    "which sudo",
    "command -v sudo",
    "apt-get download sudo",
    "man su",
    "rm -rf ./build build/ /tmp/x",
    "rm -rf ..",
    "cd /tmp && rm -rf *",
    "find . -delete",
    "find / -name '*.h'",
    "find / -name '*.h' -exec grep -l foo {} +",
    "kill -1",
    "kill -9 1234",
    "kill 0",
    "chmod -R 755 ./src",
    "ls /usr/*",
    "dd if=/dev/zero of=/dev/null count=1",
    "cat <<'EOF'\nsudo rm -rf /\nEOF",
    "case $x in sudo) echo a;; esac",
    "echo $((1 + 2)); [[ -f x ]] && echo y",
    "f() { f | grep x; }",
    "echo 'unterminated",
    "python -c 'import os; print(os.getcwd())'",
]


@pytest.mark.parametrize("command", ISSUE_FORMS + MORE_FORMS)
def test_destructive_forms_are_refused(command: str) -> None:
    assert refusal_reason(command, cwd=WORKSPACE) is not None


@pytest.mark.parametrize("command", LOOKALIKES)
def test_lookalikes_pass(command: str) -> None:
    assert refusal_reason(command, cwd=WORKSPACE) is None


def test_reasons_say_what_the_command_does() -> None:
    deletes = "deletes the root, the home directory or a system directory"
    assert refusal_reason("rm -rf /.") == deletes
    assert refusal_reason("timeout 5 sudo ls") == "runs commands as root"
    assert refusal_reason("find / -delete").startswith("deletes or changes files across the root")
    assert "kill -1" in (refusal_reason("kill -9 -1") or "")
    assert refusal_reason(":(){ :|:& };:") == "is a fork bomb"


def test_a_workspace_in_the_home_directory_is_judged_by_where_it_is() -> None:
    home = os.path.expanduser("~")
    assert refusal_reason("rm -rf *", cwd=home) is not None  # wipes the home directory
    assert refusal_reason("rm -rf *", cwd=os.path.join(home, "project")) is None
    assert refusal_reason("rm -rf ..", cwd=os.path.join(home, "project")) is not None


def test_the_tool_refuses_before_anything_runs(tmp_path: Path) -> None:
    # "require": were the guard to miss, nothing would run outside the sandbox either.
    ctx = ToolContext(workspace=tmp_path, sandbox="require")
    for command in ("timeout 5 sudo ls", "cd / && rm -rf *", "kill -9 -1"):
        result = run_tool(
            default_tools(), "t", "bash", {"command": f"touch marker; {command}"}, ctx
        )
        assert result.is_error and "refused to run this command" in result.content
        assert "Nothing was run" in result.content
    assert not (tmp_path / "marker").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_commit_message_that_mentions_sudo_runs(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, sandbox=sandbox_here())
    command = (
        "git init -q . && git -c user.name=a -c user.email=a@example.com "
        "commit -q --allow-empty -m 'fix; sudo make docs' && git log --format=%s"
    )
    result = run_tool(default_tools(), "t", "bash", {"command": command}, ctx)
    assert not result.is_error, result.content
    assert result.content.startswith("fix; sudo make docs\n")
