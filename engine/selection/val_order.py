"""Validation-set reordering for speculative evaluation (FlashEvolve §3.3).

Each validation example keeps a streak of consecutive passes (score >= pass_score). An example
that passed k rounds in a row moves to the end of the order, out of the speculative prefix, so
the prefix keeps the examples that still tell candidates apart. A failure resets the streak;
the example then stays where it is until it earns k passes again.
"""

from __future__ import annotations

from typing import Mapping, Sequence


class ValidationOrder:
    def __init__(self, example_ids: Sequence[str], k: int, pass_score: float = 1.0) -> None:
        if k < 1:
            raise ValueError("reorder k must be at least 1")
        self.order: list[str] = list(example_ids)
        self.k = k
        self.pass_score = pass_score
        self.streak: dict[str, int] = {ex: 0 for ex in self.order}

    def prefix_size(self, alpha: float) -> int:
        return max(1, min(len(self.order), round(alpha * len(self.order) + 0.4999)))

    def record(self, scores: Mapping[str, float]) -> list[str]:
        """Update streaks from one full validation; returns the examples moved to the end."""
        moved = []
        for ex in list(self.order):
            if ex not in scores:
                continue
            if scores[ex] >= self.pass_score:
                self.streak[ex] = self.streak.get(ex, 0) + 1
                if self.streak[ex] == self.k:
                    moved.append(ex)
            else:
                self.streak[ex] = 0
        if moved:
            self.order = [ex for ex in self.order if ex not in moved] + moved
        return moved

    def state(self) -> dict:
        return {"order": self.order, "streak": self.streak}

    def restore(self, state: dict) -> None:
        order = [ex for ex in state.get("order", []) if ex in self.streak]
        if sorted(order) == sorted(self.order):
            self.order = order
        self.streak.update({k: int(v) for k, v in state.get("streak", {}).items() if k in self.streak})
