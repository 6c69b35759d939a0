"""Spend (dollars and GPU-hours per stage and model, against the money caps) and GPU slot
occupancy (issue 37): the Budget tab's second panel, and the one-line slot summary the Queues
panel shows on the overview."""

from __future__ import annotations

from typing import Any, Mapping

from textual.markup import escape

from evotui.tui.backend import Frame
from evotui.tui.widgets.panels import Panel, bar

ROWS = 6
"""Stages or models listed per table; the rest are summed in one line (the export has them all)."""


def _money(usd: float) -> str:
    return f"${usd:.4f}" if usd < 100 else f"${usd:,.0f}"


def _table(title: str, rows: Mapping[str, Mapping[str, Any]], gpu: bool) -> list[str]:
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1].get("usd", 0.0), -kv[1].get("gpu_s", 0.0), kv[0]))
    head = f"[b]{title:<22}{'calls':>7}{'dollars':>11}" + (f"{'GPU-h':>9}" if gpu else "") + "[/]"
    lines = [head]
    for name, v in ordered[:ROWS]:
        lines.append(f"{escape(str(name)[:21]):<22}{int(v.get('calls', 0)):>7}{_money(float(v.get('usd', 0.0))):>11}"
                     + (f"{float(v.get('gpu_s', 0.0)) / 3600:>9.4f}" if gpu else ""))
    if len(ordered) > ROWS:
        rest = ordered[ROWS:]
        usd = sum(float(v.get("usd", 0.0)) for _, v in rest)
        lines.append(f"[$text-muted]{len(rest)} more: {_money(usd)}[/]")
    return lines


def _cap_line(name: str, spent: float, cap: float | None, unit) -> str:
    if cap is None:
        return f"{name:<8} {unit(spent)} (no cap)"
    left = max(0.0, cap - spent)
    return f"{name:<8} [$primary]{bar(spent / cap if cap else 1.0)}[/] {unit(spent)}/{unit(cap)} · left {unit(left)}"


def gpu_lines(gpu: Mapping[str, Any] | None) -> list[str]:
    if not gpu:
        return ["[$text-muted]GPU slots: none (no [evaluator] gpus)[/]"]
    if "slots" not in gpu:
        return [f"[$text-muted]GPU slots: {escape(str(gpu.get('note', 'none')))}[/]"]
    per_gpu = int(gpu.get("per_gpu", 1)) or 1
    lines = [f"[b]GPU slots[/] {gpu['busy']}/{gpu['slots']} busy · {per_gpu} per GPU · {gpu.get('leases', 0)} evaluations leased one"]
    for device, busy in (gpu.get("by_gpu") or {}).items():
        lines.append(f"GPU {escape(str(device)):<4} [$accent]{bar(busy / per_gpu, width=per_gpu if per_gpu <= 12 else 12)}[/] {busy}/{per_gpu}")
    return lines


class SpendPanel(Panel):
    TITLE = "Spend and GPU slots"

    def text(self, frame: Frame, **ctx) -> str:
        spend = frame.spend
        lines: list[str] = []
        if spend is None:
            lines.append("[$text-muted]no spend figures in this view (a run of an older release, or its config no longer reads)[/]")
        else:
            limits = frame.snap.budget_limits
            gpu_cap = limits.get("gpu_s")
            lines.append(_cap_line("dollars", float(spend.get("usd", 0.0)), limits.get("usd"), _money))
            lines.append(_cap_line("GPU-h", float(spend.get("gpu_hours", 0.0)),
                                   None if gpu_cap is None else gpu_cap / 3600, lambda h: f"{h:.4f}"))
            gpu = any(float(v.get("gpu_s", 0.0)) for v in (spend.get("by_stage") or {}).values())
            lines += _table("by stage", spend.get("by_stage") or {}, gpu)
            lines += _table("by model", spend.get("by_model") or {}, gpu)
            unpriced = spend.get("unpriced_models") or []
            if unpriced:
                lines.append(f"[$warning]no price for {escape(', '.join(unpriced))}: counted as $0 (--prices adds them)[/]")
        lines += gpu_lines(frame.gpu)
        return "\n".join(lines)
