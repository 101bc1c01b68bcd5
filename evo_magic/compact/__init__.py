"""Context compaction: the strategy protocol (`base`), the compactor that runs strategies
safely (`compactor`) with its parts (`state`, `results`, `preview`, `pins`, `server_side`), the
limits (`policy`), the layout of a compacted history (`layout`) and the server strategies'
requests (`server`, `server_edits`).

The strategies themselves live in `evo_magic.strategies`. This package's `__init__` imports
nothing, so a leaf such as `layout` is cheap to import from anywhere (the offline stand-in
reads it).
"""
