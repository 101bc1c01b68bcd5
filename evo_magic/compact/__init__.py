"""Context compaction: the strategy protocol (`base`), the compactor that runs strategies
safely (`compactor`) with its parts (`state`, `requests`, `attempt`, `results`, `preview`,
`pins`, `server_side`, `services`), the limits (`policy`) and the server strategies' requests
(`server`, `server_edits`).

The strategies themselves live in `evo_magic.strategies`. The layout of a compacted history is
`evo_magic.compacted`, a leaf below this package: the offline stand-in (`models`) reads it, and
this package uses the models (the summariser, the server's requests), so it cannot live here
without an import running back up.
"""
