"""Context compaction: layer 1 (micro), layer 2 (summary) and the policy that steers them."""

from evo_magic.compact.policy import PLACEHOLDER, CompactPolicy

__all__ = ["PLACEHOLDER", "CompactPolicy"]
