"""The docs site's build hook: every page's generated tables are made from the code as the
site builds (the same `evo_magic.doc_tables.expand` that writes them into the files)."""

from __future__ import annotations

from typing import Any

from evo_magic.doc_tables import expand


def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)
