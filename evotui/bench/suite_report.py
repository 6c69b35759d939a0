"""Figures and table of `evotui bench --suite` (pure functions over the suite's run results)."""

from __future__ import annotations

import math
import statistics
from typing import Any

TARGET_SE = 0.004
"""The standard error the issue asks of a paired quality difference; each pair reports the
seeds it would take at the spread seen."""
_TIE = 1e-9


def seeds_for_se(diffs: list[float], target: float = TARGET_SE) -> int | None:
    """Seeds a paired mean difference needs for standard error `target` at this spread (sd/sqrt n)."""
    if len(diffs) < 2:
        return None
    sd = statistics.stdev(diffs)
    return max(2, math.ceil((sd / target) ** 2))


def paired(rows: list[dict], reference: list[dict], key: str) -> dict | None:
    """rows' `key` minus the reference's, seed by seed: mean difference, standard error, seeds
    better/worse/tied, and seeds needed for TARGET_SE. None without a seed both have scored."""
    ref = {r["seed"]: r[key] for r in reference if r.get(key) is not None}
    diffs = [r[key] - ref[r["seed"]] for r in rows if r.get(key) is not None and r["seed"] in ref]
    if not diffs:
        return None
    return {"mean_diff": statistics.mean(diffs),
            "se": statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None,
            "seeds": len(diffs), "better": sum(d > _TIE for d in diffs), "worse": sum(d < -_TIE for d in diffs),
            "tied": sum(abs(d) <= _TIE for d in diffs), "seeds_for_se_0.004": seeds_for_se(diffs)}


def _median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _evaluated_per_min(run: dict) -> float | None:
    minutes = run.get("pipeline_minutes")
    return run["evaluated"] / minutes if minutes else None


def summarise(name: str, suite: Any, results: dict[str, dict[str, list[dict]]], records: dict) -> list[dict]:
    """One dict per (task, row): medians over seeds, the ratio and paired differences against the
    task's reference row, and the task's record."""
    out = []
    for t in suite.tasks:
        rows = results.get(t.name, {})
        for run in (r for runs in rows.values() for r in runs):
            run["evaluated_per_min"] = _evaluated_per_min(run)
        ref_runs = rows.get(t.reference, [])
        ref_rate = _median(ref_runs, "evaluated_per_min")
        record = records.get(t.name)
        for row, runs in rows.items():
            if not runs:
                continue
            rate = _median(runs, "evaluated_per_min")
            is_ref = row == t.reference
            out.append({
                "suite": name, "task": t.name, "row": row, "reference": t.reference, "seeds": len(runs),
                "proposals": t.proposals, "peer": bool(runs[0].get("peer")), "settings": runs[0].get("settings", ""),
                "simulated": True, "profile": suite.profile, "zero_latency": suite.zero_latency,
                "evaluated_per_min": rate,
                "ratio_vs_reference": rate / ref_rate if rate is not None and ref_rate else None,
                "best": _median(runs, "best_score"),
                "best_vs_reference": None if is_ref else paired(runs, ref_runs, "best_score"),
                "heldout": _median(runs, "heldout_score"),
                "heldout_vs_reference": None if is_ref else paired(runs, ref_runs, "heldout_score"),
                "record": record.model_dump() if record is not None else None,
                "runs": runs,
            })
    return out


def _f(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _pair(p: dict | None) -> str:
    if p is None:
        return "-"
    diff = round(p["mean_diff"], 3) + 0.0  # + 0.0: no "-0.000" for a rounding residue
    se = f"{p['se']:.3f}" if p["se"] is not None else "-"
    need = p["seeds_for_se_0.004"]
    return f"{diff:+.3f} +- {se} n={p['seeds']} ({p['better']}/{p['worse']}/{p['tied']}; {need or '-'} for .004)"


def table(name: str, suite: Any, rows: list[dict], seeds: int) -> str:
    basis = ("ZERO-LATENCY simulated backend (figures show the code path, not speed)" if suite.zero_latency
             else f"SIMULATED backend, profile {suite.profile}")
    first = suite.first_seed
    lines = [f"evotui bench --suite {name} -- {basis}, {seeds} seed(s)"
             f"{f' from seed {first}' if first else ''}; medians over seeds",
             "eval/min = evaluated proposals per simulated minute; x ref = its ratio to the reference row; best = best "
             "validation score at equal proposals; held = that best re-scored held out (prompt: held-out split, "
             "program: held-out evaluator); vs ref = paired by seed: mean diff +- se n=seeds "
             "(better/worse/tied; seeds for se .004); * = the real library"]
    for task in dict.fromkeys(r["task"] for r in rows):
        trows = [r for r in rows if r["task"] == task]
        rec = trows[0]["record"]
        lines += ["", f"{task}: {trows[0]['proposals']} proposals per run, reference {trows[0]['reference']}; record "
                  + (f"{rec['value']:g} ({rec['by']})" if rec else "-"),
                  f"  {'row':15} {'eval/min':>9} {'x ref':>6} {'best':>7} {'held':>7}  {'best vs ref':<44} held vs ref"]
        for r in trows:
            label = r["row"] + ("*" if r["peer"] else "")
            lines.append(f"  {label:15} {_f(r['evaluated_per_min'], '.2f'):>9} {_f(r['ratio_vs_reference'], '.2f'):>6} "
                         f"{_f(r['best']):>7} {_f(r['heldout']):>7}  {_pair(r['best_vs_reference']):<44} "
                         f"{_pair(r['heldout_vs_reference'])}")
        lines += [f"    {r['row']:15} {r['settings'] or '-'}" for r in trows if r["settings"]]
    return "\n".join(lines)
