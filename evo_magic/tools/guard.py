"""The bash tool's guard: refuse a few clearly destructive commands before anything runs.

It is a guard against accidents, not a security boundary: the sandbox (tools/sandbox.py) is the
defence. A determined command gets through (`x=su; ${x}do ls`, a script file, `python -c`); what
the guard catches is the slip an agent makes, in the forms it makes it.

The command is parsed with tree-sitter's bash grammar (the parser Codex also uses to inspect
shell commands), which never fails on odd input: quoting, `\\rm`, `'rm'`, command substitutions,
heredocs, `case`, `[[ ]]` and arithmetic are understood, so `echo sudo` and
`git commit -m 'fix; sudo make docs'` run while `ls; sudo ls` does not. Every simple command
(including those inside `$(...)`, backquotes, `bash -c '...'`, `eval` and `find -exec`) is looked
at after its wrappers (`env`, `nice -n 5`, `timeout 5`, `nohup`, `xargs`, `time`, ...); `cd`
is followed so that `cd / && rm -rf *` is seen for what it deletes.
"""

from __future__ import annotations

import codecs
import functools
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

_SHUTDOWN = "shuts down or restarts the machine"
_DELETES = "deletes the root, the home directory or a system directory"
_SYSTEM_DIR = re.compile(r"/(?:bin|boot|dev|etc|home|lib\w*|opt|proc|root|sbin|srv|sys|usr|var)")
_SAFE_DEVICE = re.compile(r"/dev/(?:null|zero|full|stdout|stderr|tty|fd/\d+|shm/.*)")
_BLOCK_DEVICE = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|loop|dm-|md|sr)\w*")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"})
_PRIVILEGE = frozenset({"sudo", "doas", "pkexec", "run0"})
_MODIFYING = frozenset({"rm", "rmdir", "shred", "unlink", "chmod", "chown", "chgrp", "mv", "dd"})
_MAX_DEPTH = 8
"""How deep `bash -c "bash -c '...'"` is followed."""


@dataclass(frozen=True)
class _Wrapper:
    """A command that runs the rest of its arguments as a command."""

    takes_value: frozenset[str] = frozenset()
    """Options followed by a separate value (`-n 5`)."""
    operands: int = 0
    """Arguments before the command (timeout's duration, taskset's mask)."""
    command_string: frozenset[str] = frozenset()
    """Options whose value is a whole command line (`env -S`, `flock -c`)."""


def _wrapper(values: str = "", operands: int = 0, command_string: str = "") -> _Wrapper:
    return _Wrapper(frozenset(values.split()), operands, frozenset(command_string.split()))


_WRAPPERS: dict[str, _Wrapper] = {
    "env": _wrapper("-u --unset -C --chdir", command_string="-S --split-string"),
    "nice": _wrapper("-n --adjustment"),
    "timeout": _wrapper("-s --signal -k --kill-after", operands=1),
    "nohup": _wrapper(),
    "setsid": _wrapper(),
    "stdbuf": _wrapper("-i -o -e --input --output --error"),
    "ionice": _wrapper("-c -n --class --classdata"),
    "chrt": _wrapper(operands=1),
    "taskset": _wrapper(operands=1),
    "xargs": _wrapper(
        "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-args --max-procs --max-chars"
    ),
    "exec": _wrapper("-a"),
    "command": _wrapper(),
    "builtin": _wrapper(),
    "time": _wrapper(),
    "unbuffer": _wrapper(),
    "busybox": _wrapper(),
    "flock": _wrapper("-w --timeout -E --conflict-exit-code", 1, "-c --command"),
    "watch": _wrapper("-n --interval -d --differences"),
}


@functools.cache
def _language() -> Any:
    # Imported on first use: loading the grammar costs ~40 ms, not to be paid by %load_ext.
    import tree_sitter_bash
    from tree_sitter import Language

    return Language(tree_sitter_bash.language())


def _parse(command: str) -> Any:
    from tree_sitter import Parser

    return Parser(_language()).parse(command.encode("utf-8", "surrogateescape")).root_node


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "surrogateescape")


def _word(node: Any) -> str:
    """The value bash gives a word node after quote removal (expansions are left as written)."""
    kind = node.type
    if kind == "word":
        return re.sub(r"\\(.)", r"\1", _text(node), flags=re.DOTALL)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "ansi_c_string":
        try:
            return codecs.decode(_text(node)[2:-1], "unicode_escape")
        except UnicodeDecodeError:
            return _text(node)[2:-1]
    if kind == "string":
        parts = []
        for child in node.named_children:
            if child.type == "string_content":
                parts.append(re.sub(r"\\([$`\"\\\n])", r"\1", _text(child)))
            else:
                parts.append(_text(child))
        return "".join(parts)
    if kind in ("concatenation", "command_name"):
        return "".join(_word(child) for child in node.children)
    return _text(node)


@dataclass
class _Scan:
    """What the guard knows while it reads one command line, in order."""

    cwd: str | None
    """The directory the next simple command runs in, when known."""
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    depth: int = 0


def refusal_reason(command: str, cwd: os.PathLike[str] | str | None = None) -> str | None:
    """Why `command` is refused (completing "it ..."), or None when the guard lets it run.

    `cwd` is the directory the command starts in (the workspace); with it, relative targets such
    as `rm -rf ..` are judged by where they lead.
    """
    scan = _Scan(cwd=None if cwd is None else posixpath.normpath(os.fspath(cwd)))
    return _check_script(command, scan)


def _check_script(command: str, scan: _Scan) -> str | None:
    if scan.depth > _MAX_DEPTH:
        return None
    for node in _walk(_parse(command)):
        reason = _check_node(node, scan)
        if reason is not None:
            return reason
    return None


def _walk(node: Any) -> Iterator[Any]:
    """Every node, in source order (a command before the commands that follow it)."""
    yield node
    for child in node.children:
        yield from _walk(child)


def _check_node(node: Any, scan: _Scan) -> str | None:
    if node.type == "command":
        words = [_word(child) for child in node.children_by_field_name("name")]
        words += [_word(child) for child in node.children_by_field_name("argument")]
        return _check_words(words, scan) if words else None
    if node.type == "file_redirect":
        return _check_redirect(node)
    if node.type == "function_definition":
        return _check_function(node)
    return None


def _check_redirect(node: Any) -> str | None:
    operator = next((_text(c) for c in node.children if not c.is_named), "")
    target = node.named_children[-1] if node.named_children else None
    if ">" in operator and target is not None and _BLOCK_DEVICE.fullmatch(_word(target)):
        return "writes raw data to a block device"
    return None


def _check_function(node: Any) -> str | None:
    name_node = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    if name_node is None or body is None:
        return None
    name = _text(name_node)
    for inner in _walk(body):
        if inner.type == "pipeline":
            called = [
                _word(command.child_by_field_name("name"))
                for command in inner.named_children
                if command.type == "command" and command.child_by_field_name("name")
            ]
            if called.count(name) >= 2 or (called and name in called and "&" in _text(body)):
                return "is a fork bomb"
    return None


def _check_words(words: list[str], scan: _Scan) -> str | None:
    """Judge one simple command given as words (after quote removal)."""
    while words:
        name = posixpath.basename(words[0])
        args = words[1:]
        if name in _PRIVILEGE:
            return "runs commands as root"
        if name == "su":
            return "switches to another user (root)"
        if name == "command" and {"-v", "-V"} & set(args):
            return None  # only looks the name up
        if name in _WRAPPERS:
            words, inner = _unwrap(_WRAPPERS[name], args, env=name == "env")
            if inner is not None:
                reason = _nested(inner, scan)
                if reason is not None:
                    return reason
            continue
        if name in _SHELLS:
            script = _shell_script(args)
            return None if script is None else _nested(script, scan)
        if name == "eval":
            return _nested(" ".join(args), scan)
        return _check_program(name, args, scan)
    return None


def _nested(script: str, scan: _Scan) -> str | None:
    inner = _Scan(cwd=scan.cwd, home=scan.home, depth=scan.depth + 1)
    return _check_script(script, inner)


def _unwrap(wrapper: _Wrapper, args: list[str], env: bool) -> tuple[list[str], str | None]:
    """The wrapped command's words, and a command-line option's value (`env -S '...'`)."""
    index = 0
    command_string = None
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if env and re.fullmatch(r"\w+=.*", arg, flags=re.DOTALL):
            index += 1
            continue
        if not arg.startswith("-") or arg == "-":
            break
        option = arg.split("=", 1)[0]
        if option in wrapper.command_string:
            value = arg.split("=", 1)[1] if "=" in arg else _at(args, index + 1)
            command_string = value
        if arg in wrapper.takes_value or arg in wrapper.command_string:
            index += 1  # its value follows
        index += 1
    rest = args[index + wrapper.operands :]
    if rest[:1] and rest[0] in wrapper.command_string:  # `flock FILE -c '...'`
        return [], _at(rest, 1)
    return rest, command_string


def _at(args: list[str], index: int) -> str | None:
    return args[index] if index < len(args) else None


def _shell_script(args: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` (`-lc`, `-e -c`, `-o pipefail -c` included), else None."""
    reads_script = False
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2  # an option with a value
            continue
        if arg.startswith("-") and not arg.startswith("--"):
            reads_script = reads_script or "c" in arg[1:]
        elif not arg.startswith("--"):
            return arg if reads_script else None
        index += 1
    return None


def _check_program(name: str, args: list[str], scan: _Scan) -> str | None:
    """The rules for one program (after its wrappers): see `_PROGRAMS`."""
    if name.startswith("mkfs") or name == "mke2fs":
        return "formats a filesystem"
    rule = _PROGRAMS.get(name)
    return None if rule is None else rule(args, scan)


def _cd(args: list[str], scan: _Scan) -> str | None:
    scan.cwd = _change_directory(args, scan)
    return None


def _shutdown(args: list[str], scan: _Scan) -> str | None:
    return _SHUTDOWN


def _check_systemctl(args: list[str], scan: _Scan) -> str | None:
    return _SHUTDOWN if {"poweroff", "reboot", "halt", "kexec"} & set(args) else None


def _check_init(args: list[str], scan: _Scan) -> str | None:
    return _SHUTDOWN if args[:1] in (["0"], ["6"]) else None


def _check_dd(args: list[str], scan: _Scan) -> str | None:
    for arg in args:
        if arg.startswith("of=/dev/") and not _SAFE_DEVICE.fullmatch(arg[3:]):
            return "writes raw data to a device"
    return None


def _check_rm(args: list[str], scan: _Scan) -> str | None:
    if "--no-preserve-root" in args:
        return "disables rm's protection of /"
    return _DELETES if any(_dangerous(arg, scan) for arg in _operands(args)) else None


def _check_ownership(args: list[str], scan: _Scan) -> str | None:
    """chmod, chown, chgrp: recursively over the root, the home or a system directory."""
    recursive = any(re.fullmatch(r"-\w*R\w*|--recursive", arg) for arg in args)
    if recursive and any(_dangerous(arg, scan) for arg in _operands(args)):
        return "changes permissions or ownership of the whole system or home directory"
    return None


def _operands(args: list[str]) -> list[str]:
    """The arguments that are not options (everything after `--`)."""
    if "--" in args:
        cut = args.index("--")
        return [a for a in args[:cut] if not a.startswith("-")] + args[cut + 1 :]
    return [arg for arg in args if not arg.startswith("-") or arg == "-"]


def _check_find(args: list[str], scan: _Scan) -> str | None:
    starts = []
    for arg in args:
        if arg.startswith("-") or arg in ("(", "!"):
            break
        starts.append(arg)
    starts = starts or ["."]
    changes = "-delete" in args
    for index, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((i for i in range(index + 1, len(args)) if args[i] in (";", "+")), len(args))
            inner = args[index + 1 : end]
            reason = _check_words(inner, _Scan(cwd=None, home=scan.home, depth=scan.depth + 1))
            if reason is not None:
                return reason
            if inner and posixpath.basename(inner[0]) in _MODIFYING:
                changes = True
    if changes and any(_dangerous(start, scan) for start in starts):
        return "deletes or changes files across the root, the home directory or a system directory"
    return None


def _check_kill(args: list[str], scan: _Scan) -> str | None:
    index = 0
    if args[:1] and args[0] in ("-s", "-n", "--signal"):
        index = 2
    elif args[:1] and args[0].startswith("-") and args[0] != "--":
        if args[0] in ("-l", "-L", "--list"):
            return None
        index = 1  # -9, -KILL, -SIGTERM
    if args[index : index + 1] == ["--"]:
        index += 1
    if "-1" in args[index:]:
        return "signals every process it may (kill -1), the notebook kernel included"
    return None


_PROGRAMS: dict[str, Callable[[list[str], _Scan], str | None]] = {
    "cd": _cd,
    "pushd": _cd,
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff"), _shutdown),
    "systemctl": _check_systemctl,
    "init": _check_init,
    "telinit": _check_init,
    "dd": _check_dd,
    "rm": _check_rm,
    **dict.fromkeys(("chmod", "chown", "chgrp"), _check_ownership),
    "find": _check_find,
    "kill": _check_kill,
}
"""The rule of each program the guard looks at (`cd` and `pushd` follow the directory)."""


def _expand_home(value: str, home: str) -> str:
    match = re.match(r"(?:~|\$HOME|\$\{HOME\})(?=/|$)", value)
    return home + value[match.end() :] if match else value


def _absolute(value: str, scan: _Scan) -> str | None:
    """`value` as a normalised absolute path, or None when it cannot be known here."""
    value = _expand_home(value, scan.home)
    if not value.startswith("/"):
        if scan.cwd is None or "$" in value:
            return None
        value = posixpath.join(scan.cwd, value)
    return "/" + posixpath.normpath(value).lstrip("/")


def _change_directory(args: list[str], scan: _Scan) -> str | None:
    operands = [arg for arg in args if not arg.startswith("-")]
    if not operands:
        return scan.home if "-" not in args else None
    return _absolute(operands[0], scan)


def _dangerous(value: str, scan: _Scan) -> bool:
    """Whether `value` names the root, the home directory (or a parent of it), a top-level
    system directory, or everything inside one of those (`/*`, `~/*`)."""
    path = _absolute(value, scan)
    if path is None:
        return False
    while path != "/" and re.fullmatch(r"[*?.]*[*?][*?.]*", posixpath.basename(path)):
        path = posixpath.dirname(path)  # a glob of everything in a directory: the directory
    home = "/" + posixpath.normpath(scan.home).lstrip("/")
    return (
        path == "/"
        or bool(_SYSTEM_DIR.fullmatch(path))
        or path == home
        or home.startswith(path.rstrip("/") + "/")
    )
