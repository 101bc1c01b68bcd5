"""The docs site's build hook: every page's generated tables are made from the code as the
site builds (the same `evo_magic.doc_tables.expand` that writes them into the files), and a
```python notest fence (a block the docs tests skip) is shown as the Python it is."""

from __future__ import annotations

import re
from typing import Any

from evo_magic.doc_tables import expand

NOTEST = re.compile(r"^(\s*```python) notest\s*$", re.MULTILINE)
"""`notest` is for the tests only: Markdown's fences take no bare word after the language, so
left in, the block would be read as text."""


def on_page_markdown(markdown: str, **_: Any) -> str:
    return NOTEST.sub(r"\1", expand(markdown))
