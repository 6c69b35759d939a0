"""Queue items and the typed products their stages hand on (engine/items/work_item.py, products.py).

Imported as `engine.items` by the pipeline, the kinds and the capabilities alike: it depends on
nothing above it, so the pipeline can read an item's products without importing a kind.
"""

from engine.items.products import (GateScores, ProgramEvaluation, Proposal, RepairDecision, Rollout, RolloutRelease,
                                   Validation)
from engine.items.work_item import ChainLink, ItemKind, MergeOf, SpeculativeEntry, WorkItem, current_item

__all__ = ["ChainLink", "GateScores", "ItemKind", "MergeOf", "ProgramEvaluation", "Proposal", "RepairDecision", "Rollout",
           "RolloutRelease", "SpeculativeEntry", "Validation", "WorkItem", "current_item"]
