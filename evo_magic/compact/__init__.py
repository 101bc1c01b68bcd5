"""Context compaction: the strategy protocol, the compactor that runs strategies safely, the
compacted message's layout, the compaction state, and the default pipeline's settings.

The strategies themselves live in `evo_magic.strategies`.
"""

from evo_magic.compact.base import Context, Edited, Strategy
from evo_magic.compact.policy import PLACEHOLDER, CompactPolicy

__all__ = ["PLACEHOLDER", "CompactPolicy", "Context", "Edited", "Strategy"]
