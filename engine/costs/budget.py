"""Budgets with reservations.

Work reserves its worst-case cost when it is admitted; actual spending is charged as it happens
and the unused rest of the reservation is released when the item ends. A new item is admitted
only if spent + reserved + its reservation fits every limit, so the run never overshoots a
limit and ends by draining admitted work, never by throwing paid work away.

Dollars and GPU-seconds (usd, gpu_s) follow the same rule: an item's worst case is its LLM calls
times the most one call can cost (engine/costs/spend.py worst_call), and every recorded call is charged
at its price (charge_call). Estimates name llm_calls; the money keys are derived from them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from engine.config import BudgetConfig

if TYPE_CHECKING:
    from engine.costs.spend import SpendMeter

KEYS = ("proposals", "llm_calls", "tokens", "metric_calls", "usd", "gpu_s")


@dataclass
class Reservation:
    amounts: dict[str, float] = field(default_factory=dict)
    released: bool = False


class Budget:
    def __init__(self, limits: BudgetConfig, spent: dict[str, float] | None = None,
                 meter: SpendMeter | None = None) -> None:
        self.limits = limits
        self.meter = meter
        """Prices calls (None: calls cost nothing in usd/gpu_s, as in unit tests of other keys)."""
        self.spent = {k: float((spent or {}).get(k, 0.0)) for k in KEYS}
        self.reserved = {k: 0.0 for k in KEYS}
        self.wall_spent_before = float((spent or {}).get("wall_s", 0.0))
        """Wall seconds used by earlier sessions of a resumed run."""
        self.exhausted: str | None = None

    def limit(self, key: str) -> float | None:
        if key == "gpu_s":
            hours = self.limits.max_gpu_hours
            return None if hours is None else float(hours) * 3600.0
        value = getattr(self.limits, f"max_{key}")
        return None if value is None else float(value)

    def _with_money(self, estimate: dict[str, float]) -> dict[str, float]:
        """The estimate plus its worst-case dollars and GPU-seconds (from its LLM calls)."""
        calls = estimate.get("llm_calls", 0.0)
        if self.meter is None or not calls:
            return dict(estimate)
        usd, gpu_s = self.meter.worst_call()
        return {**estimate, "usd": calls * usd, "gpu_s": calls * gpu_s}

    def limits_dict(self) -> dict[str, float | None]:
        return {k: self.limit(k) for k in (*KEYS, "wall_s")}

    def worst_case(self, estimate: dict[str, float]) -> dict[str, float]:
        """What admitting an item with this estimate reserves (money keys included)."""
        return self._with_money(estimate)

    def try_reserve(self, estimate: dict[str, float], wall_s: float) -> Reservation | None:
        """Reserve `estimate` or return None (and remember which limit stopped admission)."""
        estimate = self._with_money(estimate)
        if self.limits.max_wall_s is not None and self.wall_spent_before + wall_s >= self.limits.max_wall_s:
            self.exhausted = "wall_s"
            return None
        for key, amount in estimate.items():
            cap = self.limit(key)
            if key == "metric_calls" and self.limits.metric_calls_rule == "gepa":
                # Admitted while what is made and reserved is under the budget (GEPA's rule).
                if cap is not None and self.spent[key] + self.reserved[key] >= cap:
                    self.exhausted = key
                    return None
            elif cap is not None and self.spent[key] + self.reserved[key] + amount > cap:
                # Nothing in flight and still no room: this limit is used up for good.
                self.exhausted = key
                return None
        for key, amount in estimate.items():
            self.reserved[key] += amount
        self.exhausted = None
        return Reservation(dict(estimate))

    def reserve_unchecked(self, estimate: dict[str, float]) -> Reservation:
        """Reserve without the admission test (interrupted work re-enqueued on resume)."""
        estimate = self._with_money(estimate)
        for key, amount in estimate.items():
            self.reserved[key] += amount
        return Reservation(dict(estimate))

    def charge(self, key: str, amount: float, reservation: Reservation | None = None) -> None:
        self.spent[key] += amount
        if reservation is not None and not reservation.released:
            take = min(amount, reservation.amounts.get(key, 0.0))
            reservation.amounts[key] = reservation.amounts.get(key, 0.0) - take
            self.reserved[key] -= take

    def charge_call(self, rec, reservation: Reservation | None = None) -> tuple[float, float]:
        """Price one recorded LLM call (a CallRecord) and charge it; returns (dollars, GPU-seconds)."""
        if self.meter is None:
            return 0.0, 0.0
        usd, gpu_s = self.meter.record(rec.endpoint, rec.url, rec.model, rec.stage, rec.prompt_tokens,
                                       rec.completion_tokens, rec.latency_s,
                                       cached=getattr(rec, "cached_tokens", 0))
        self.charge("usd", usd, reservation)
        self.charge("gpu_s", gpu_s, reservation)
        return usd, gpu_s

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
