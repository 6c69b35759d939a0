"""The analysis as terminal text: tables and small text plots."""

from __future__ import annotations

from typing import Any

_BARS = " ▁▂▃▄▅▆▇█"


def spark(values: list[float]) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(_BARS[1 + round((v - lo) / span * (len(_BARS) - 2))] for v in values)


def bar(x: float, width: int = 24) -> str:
    n = max(0, min(width, round(x * width)))
    return "█" * n + "·" * (width - n)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def text(result: dict[str, Any]) -> str:
    out = [f"analysis of {result['run_id']} ({result['task']}, {result['status']})", ""]
    lin = result["lineage"]
    out.append("LINEAGE")
    if lin.get("best_id") is None:
        out.append("  no scored candidates")
    else:
        for key in ("proposals", "seed_score", "best_id", "best_score", "best_depth", "dead_branch_share",
                    "proposals_to_best", "time_to_best_s", "largest_jump_share", "jackpot_then_flat"):
            out.append(f"  {key:20} {_fmt(lin[key])}")
        tl = lin["timeline"]
        out.append(f"  best-so-far          {spark([t['score'] for t in tl])}  "
                   + " ".join(f"{t['proposal']}:{t['score']:.4f}" for t in tl[-6:]))
    cyc = result["cycling"]
    out += ["", "CYCLING (re-added lines the lineage deleted before; normalised, length >= 5)"]
    out.append(f"  edits {cyc['edits']}, added lines {cyc['added_lines']}, recycled {cyc['recycled_lines']} "
               f"(rate {cyc['recycle_rate']:.3f}): literal {cyc['by_class']['literal']}, "
               f"tuning {cyc['by_class']['tuning']}, trivial {cyc['by_class']['trivial']}")
    gens = cyc["per_generation"]
    if gens:
        out.append(f"  rate per generation  {spark([g['rate'] for g in gens])}  (generations 1..{gens[-1]['generation']})")
    for t in cyc["top_lines"][:8]:
        out.append(f"  {t['count']:>4}x {t['class']:8} {t['line'][:90]}")
    et = result.get("edit_types")
    if et is not None:
        out += ["", f"EDIT TYPES (judge {et['judge_model']}: {et['edits']} edits, {et['judge_calls']} LLM calls, "
                    f"{et['cached']} cached, {et['invalid_answers']} non-JSON answers, {et['unknown']} unknown)"]
        out.append(f"  {'label':22} {'edits':>5} {'prevalence':>26} {'odds ratio':>10} {'enr. bsf':>8} {'enr. final':>10}")
        for r in et["labels"]:
            out.append(f"  {r['label']:22} {r['edits']:>5} {bar(r['prevalence'], 16)} {r['prevalence']:>8.3f} "
                       f"{_fmt(r['odds_ratio']):>10} {_fmt(r['enrichment_best_so_far']):>8} "
                       f"{_fmt(r['enrichment_final_lineage']):>10}")
    out += heldout_text(result.get("heldout"))
    return "\n".join(out)


def heldout_text(h: dict[str, Any] | None) -> list[str]:
    if h is None:
        return []
    if not h["available"]:
        return ["", f"HELD-OUT: not available ({h['reason']})"]
    out = ["", f"HELD-OUT ({h['source']}): {h['label'].upper()}"]
    out.append(f"  public gain {_fmt(h['public_gain'])}, held-out gain {_fmt(h['heldout_gain'])}, retained "
               f"{_fmt(h['retained'])} (aligned >= 0.5, mild overfit 0..0.5, severe < 0); "
               f"{h['steps_disagreeing']} best-so-far step(s) lowered the held-out score")
    if h["kind"] == "prompt":
        out.append(f"  task-model calls {h['llm_calls']}, cached {h['cached']}, failed {h['failed_calls']}")
    out.append(f"  {'proposal':>8} {'candidate':10} {'public':>10} {'held-out':>10}")
    for s in h["chain"]:
        out.append(f"  {s['proposal']:>8} {s['candidate_id']:10} {_fmt(s['public']):>10} {_fmt(s['heldout']):>10}"
                   + ("" if s["heldout"] is not None else f"  {s['note'][:60]}"))
    return out
