"""The tables of the README and the docs site, made from the code that owns each fact.

A page holds a generated table between two markers::

    <!-- table: settings -->
    | setting | default | meaning |
    ...
    <!-- /table -->

`expand(text)` rewrites every such block from `TABLES`; the docs site's build hook runs it on
every page, and ``python -m evo_magic.doc_tables FILE ...`` rewrites files in place (the README
and the pages, so that they read right where Markdown is shown without a build). A test checks
the files hold what `expand` makes, so a table is never written twice by hand.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path


def _magics() -> str:
    from evo_magic.notebook.magics import magics_markdown

    return magics_markdown()


def _settings() -> str:
    from evo_magic.notebook.config import settings_markdown

    return settings_markdown()


def _strategies() -> str:
    from evo_magic.strategies.registry import strategies_markdown

    return strategies_markdown()


def _catalog() -> str:
    from evo_magic.catalog_table import catalog_markdown

    return catalog_markdown()


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _strategy_parameters() -> str:
    """One section per built-in strategy: what it does, where it comes from, its module, and
    each parameter with its default, its rule and its help, read from the declarations."""
    from evo_magic.strategies.registry import _shown, describe_registered, registered

    factories = registered()
    sections = []
    for info in describe_registered():
        if info.dotted.split(".")[0] != "evo_magic":
            continue  # another package's plug-in
        target = factories[info.name]
        module = inspect.getmodule(target)
        path = Path(module.__file__ or "").name if module else ""
        doc = inspect.cleandoc(inspect.getdoc(target) or "").split("\n\n")[0].replace("\n", " ")
        lines = [
            f"### `{info.name}`",
            "",
            f"`{info.dotted.rsplit('.', 1)[-1]}` in `evo_magic/strategies/{path}`; runs "
            f"{info.when}; source: {info.source or 'evo_magic'}.",
            "",
            doc,
            "",
        ]
        if info.parameters:
            lines += ["| parameter | default | rule | meaning |", "| --- | --- | --- | --- |"]
            lines += [
                f"| `{p.name}` | `{_cell(_shown(p.default))}` | {_cell(p.rule)} | {_cell(p.help)} |"
                for p in info.parameters
            ]
        else:
            lines.append("No parameters.")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def _api() -> str:
    """A reference entry (mkdocstrings' `:::`) for each public name of `evo_magic.__all__`,
    by the module that defines it, so a new export is documented without an edit here."""
    import evo_magic

    entries = []
    for name in evo_magic.__all__:
        obj = getattr(evo_magic, name)
        if isinstance(obj, types.ModuleType):  # a namespace of names, e.g. `tasks`
            entries.append(f"::: {obj.__name__}")
        else:
            entries.append(f"::: {obj.__module__}.{obj.__qualname__}")
    return "\n\n".join(entries)


TABLES: dict[str, Callable[[], str]] = {
    "magics": _magics,
    "settings": _settings,
    "strategies": _strategies,
    "strategy-parameters": _strategy_parameters,
    "catalog": _catalog,
    "api": _api,
}
"""Each generated table by the name its marker gives, and the function that makes it."""

_BLOCK = re.compile(r"(<!-- table: ([a-z-]+) -->\n)(.*?)(<!-- /table -->)", re.DOTALL)


def expand(text: str) -> str:
    """`text` with every marked table made afresh from the code; an unknown table name raises
    ValueError naming it and the known ones. Text outside the markers is left as it is."""

    def made(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in TABLES:
            raise ValueError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return _BLOCK.sub(made, text)


def main(argv: list[str]) -> int:
    """Rewrite each file named in `argv` with its tables made afresh; say which changed."""
    if not argv:
        print("usage: python -m evo_magic.doc_tables FILE [FILE ...]", file=sys.stderr)
        return 2
    for name in argv:
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        new = expand(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
