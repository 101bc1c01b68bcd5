"""The signatures of a source file's classes, functions and types, bodies left out (what
`fold-files` puts back after a compaction).

Python is read with its own `ast`, always. JavaScript, TypeScript (and TSX), Go and Rust are
read with tree-sitter (the project's dependency) and each language's grammar package, which the
`fold` extra installs (from a checkout, `python -m pip install -e '.[fold]'`): the official
`tree-sitter-javascript`, `tree-sitter-typescript`, `tree-sitter-go` and `tree-sitter-rust`
wheels, each a few hundred kilobytes with nothing downloaded at run time. Without a grammar,
`signatures` raises `MissingGrammar`, whose message is the one line that says so and how to
install it.

A signature is the declaration's source up to its body (`function total(items: Item[]):
number`, `func (s *Server) Start(port int) error`, `pub fn get(&self, key: &str) ->
Option<T>`), on one line; the members of a class, interface, trait, `impl` or module follow it,
indented. A file that does not parse gives what its parser recovered (tree-sitter) or nothing
(Python).
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from evo_magic.extras import install_command

EXTRA = "fold"
MAX_LINE = 200
"""Characters of one signature at most (a long type alias is cut, with an ellipsis)."""
_SPACE = re.compile(r"\s+")


class MissingGrammar(ImportError):
    """The grammar of a file's language is not installed; the message is one line."""


@dataclass(frozen=True)
class Grammar:
    """How to read one language with tree-sitter."""

    name: str
    module: str
    function: str
    """The module's function returning the language (e.g. `language_typescript`)."""
    signatures: frozenset[str]
    """Node types shown as one line each, up to their body."""
    containers: frozenset[str] = frozenset()
    """Node types shown up to their body, then their members, indented."""
    wrappers: frozenset[str] = frozenset()
    """Node types whose children are read in their place (`export ...`): the line starts at
    the wrapper."""


_JS_SIGNATURES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "lexical_declaration",
        "variable_declaration",
    }
)
_TS_SIGNATURES = _JS_SIGNATURES | {
    "abstract_method_signature",
    "method_signature",
    "function_signature",
    "type_alias_declaration",
    "enum_declaration",
}
_JS_CONTAINERS = frozenset({"class_declaration", "class"})
_TS_CONTAINERS = _JS_CONTAINERS | {"abstract_class_declaration", "interface_declaration"}
_EXPORT = frozenset({"export_statement"})

_JAVASCRIPT = Grammar(
    "JavaScript", "tree_sitter_javascript", "language", _JS_SIGNATURES, _JS_CONTAINERS, _EXPORT
)
_TYPESCRIPT = Grammar(
    "TypeScript",
    "tree_sitter_typescript",
    "language_typescript",
    _TS_SIGNATURES,
    _TS_CONTAINERS,
    _EXPORT,
)
_GO = Grammar(
    "Go",
    "tree_sitter_go",
    "language",
    frozenset({"function_declaration", "method_declaration", "method_elem"}),
    frozenset({"type_declaration"}),
)
_RUST = Grammar(
    "Rust",
    "tree_sitter_rust",
    "language",
    frozenset(
        {
            "function_item",
            "function_signature_item",
            "struct_item",
            "enum_item",
            "type_item",
            "union_item",
        }
    ),
    frozenset({"impl_item", "trait_item", "mod_item"}),
)
GRAMMARS: dict[str, Grammar] = {
    ".js": _JAVASCRIPT,
    ".mjs": _JAVASCRIPT,
    ".cjs": _JAVASCRIPT,
    ".jsx": _JAVASCRIPT,
    ".ts": _TYPESCRIPT,
    ".mts": _TYPESCRIPT,
    ".cts": _TYPESCRIPT,
    ".tsx": Grammar(
        "TSX",
        "tree_sitter_typescript",
        "language_tsx",
        _TS_SIGNATURES,
        _TS_CONTAINERS,
        _EXPORT,
    ),
    ".go": _GO,
    ".rs": _RUST,
}
"""The languages read with tree-sitter, by file suffix."""


def folds(path: str) -> bool:
    """Whether `signatures` reads files named like `path` (Python, or a tree-sitter language)."""
    return _suffix(path) in (".py", *GRAMMARS)


def signatures(path: str, text: str) -> list[str]:
    """The signature lines of source `text` of the file `path` (by its suffix), nested ones
    indented; [] for a language not read. Raises `MissingGrammar` when the language's grammar
    is not installed."""
    suffix = _suffix(path)
    if suffix == ".py":
        return python_signatures(text)
    grammar = GRAMMARS.get(suffix)
    if grammar is None:
        return []
    from tree_sitter import Parser

    tree = Parser(_language(grammar)).parse(text.encode("utf-8", "surrogatepass"))
    return list(_walk(grammar, tree.root_node.named_children, ""))


def python_signatures(text: str) -> list[str]:
    """The class and function signatures of Python source `text` (its `ast`); [] when it does
    not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return list(_python(tree.body, ""))


def _suffix(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


@cache
def _language(grammar: Grammar) -> Any:
    from tree_sitter import Language

    try:
        module = importlib.import_module(grammar.module)
    except ImportError:
        raise MissingGrammar(
            f"{grammar.name} files are not folded: their tree-sitter grammar "
            f"({grammar.module.replace('_', '-')}) comes with the {EXTRA!r} extra: "
            f"{install_command(EXTRA)}"
        ) from None
    return Language(getattr(module, grammar.function)())


def _walk(
    grammar: Grammar, nodes: Sequence[Any], indent: str, start: int | None = None
) -> Iterator[str]:
    for node in nodes:
        if node.type in grammar.wrappers:
            yield from _walk(grammar, node.named_children, indent, node.start_byte)
            continue
        if node.type not in grammar.signatures and node.type not in grammar.containers:
            continue
        body = _body(node)
        if node.type in ("lexical_declaration", "variable_declaration") and body is None:
            continue  # a constant, not a function
        head = _head(node, start if start is not None else node.start_byte, body)
        if head:
            yield indent + head
        if node.type in grammar.containers and body is not None:
            yield from _walk(grammar, _members(body), indent + "    ")
        start = None


def _body(node: Any) -> Any:
    """Where the declaration's body starts (None: it has none; shown whole)."""
    if node.type in ("lexical_declaration", "variable_declaration"):
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value")
            if value is not None and value.type in (
                "arrow_function",
                "function_expression",
                "function",
                "generator_function",
            ):
                return value.child_by_field_name("body")
        return None
    if node.type == "type_declaration":  # Go: `type Name struct {...}` / `interface {...}`
        for spec in node.named_children:
            kind = spec.child_by_field_name("type")
            if kind is not None and kind.type in ("struct_type", "interface_type"):
                return kind
        return None
    return node.child_by_field_name("body")


def _members(body: Any) -> Sequence[Any]:
    if body.type == "struct_type":
        return ()  # a struct's fields are data, not signatures
    return body.named_children


def _head(node: Any, start: int, body: Any) -> str:
    """The declaration's text from `start` up to its body, on one line, capped."""
    source = node.text
    end = body.start_byte - node.start_byte if body is not None else len(source)
    if body is not None and body.type in ("struct_type", "interface_type"):
        end += len(body.text.split(b"{", 1)[0])  # keep the `struct` / `interface` keyword
    prefix = b"" if start >= node.start_byte else _prefix(node, start)
    text = (prefix + source[:end]).decode("utf-8", "replace")
    line = _SPACE.sub(" ", text).strip().rstrip("{=;,").rstrip()
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def _prefix(node: Any, start: int) -> bytes:
    """The wrapper's text before `node` (`export `, `export default `)."""
    wrapper = node.parent
    return wrapper.text[: node.start_byte - wrapper.start_byte] if wrapper is not None else b""


def _python(body: Sequence[ast.stmt], indent: str) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            yield f"{indent}class {node.name}({bases}):" if bases else f"{indent}class {node.name}:"
            yield from _python(node.body, indent + "    ")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            yield f"{indent}{kind} {node.name}({ast.unparse(node.args)}){returns}: ..."
