"""Budgets with reservations.

Work reserves its worst-case cost when it is admitted; actual spending is charged as it happens
and the unused rest of the reservation is released when the item ends. A new item is admitted
only if spent + reserved + its reservation fits every limit, so the run never overshoots a
limit and ends by draining admitted work, never by throwing paid work away.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.config import BudgetConfig

KEYS = ("proposals", "llm_calls", "tokens", "metric_calls")


@dataclass
class Reservation:
    amounts: dict[str, float] = field(default_factory=dict)
    released: bool = False


class Budget:
    def __init__(self, limits: BudgetConfig, spent: dict[str, float] | None = None) -> None:
        self.limits = limits
        self.spent = {k: float((spent or {}).get(k, 0.0)) for k in KEYS}
        self.reserved = {k: 0.0 for k in KEYS}
        self.wall_spent_before = float((spent or {}).get("wall_s", 0.0))
        """Wall seconds used by earlier sessions of a resumed run."""
        self.exhausted: str | None = None

    def limit(self, key: str) -> float | None:
        value = getattr(self.limits, f"max_{key}")
        return None if value is None else float(value)

    def limits_dict(self) -> dict[str, float | None]:
        return {k: self.limit(k) for k in (*KEYS, "wall_s")}

    def try_reserve(self, estimate: dict[str, float], wall_s: float) -> Reservation | None:
        """Reserve `estimate` or return None (and remember which limit stopped admission)."""
        if self.limits.max_wall_s is not None and self.wall_spent_before + wall_s >= self.limits.max_wall_s:
            self.exhausted = "wall_s"
            return None
        for key, amount in estimate.items():
            cap = self.limit(key)
            if cap is not None and self.spent[key] + self.reserved[key] + amount > cap:
                # Nothing in flight and still no room: this limit is used up for good.
                self.exhausted = key
                return None
        for key, amount in estimate.items():
            self.reserved[key] += amount
        self.exhausted = None
        return Reservation(dict(estimate))

    def reserve_unchecked(self, estimate: dict[str, float]) -> Reservation:
        """Reserve without the admission test (interrupted work re-enqueued on resume)."""
        for key, amount in estimate.items():
            self.reserved[key] += amount
        return Reservation(dict(estimate))

    def charge(self, key: str, amount: float, reservation: Reservation | None = None) -> None:
        self.spent[key] += amount
        if reservation is not None and not reservation.released:
            take = min(amount, reservation.amounts.get(key, 0.0))
            reservation.amounts[key] = reservation.amounts.get(key, 0.0) - take
            self.reserved[key] -= take

    def release(self, reservation: Reservation | None) -> None:
        if reservation is None or reservation.released:
            return
        for key, amount in reservation.amounts.items():
            self.reserved[key] -= amount
        reservation.released = True

    def counters(self, wall_s: float) -> dict[str, float]:
        return {**self.spent, "wall_s": self.wall_spent_before + wall_s}

    def remaining(self, key: str) -> float | None:
        cap = self.limit(key)
        return None if cap is None else max(0.0, cap - self.spent[key])
