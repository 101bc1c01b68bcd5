"""Context compaction: the strategy protocol, the compactor that runs strategies safely, the
compaction state, and the limits (`CompactPolicy`).

The strategies themselves live in `evo_magic.strategies`; the compacted message's layout in
`evo_magic.compacted` (the offline stand-in reads it too).
"""

from evo_magic.compact.base import Context, Edited, Strategy
from evo_magic.compact.policy import CompactPolicy

__all__ = ["CompactPolicy", "Context", "Edited", "Strategy"]
