"""Aggregation, table and terminal plot of `evotui bench` results (pure functions)."""

from __future__ import annotations

import json
import math
import statistics


def emit(rows: list[dict], out, as_json: bool, render) -> None:
    """Benchmark rows to --out (if given) and to stdout: JSON lines, or render(rows) as a table."""
    if out is not None:
        out.write_text(json.dumps(rows, indent=1))
    if as_json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(render(rows))


def percentile(hist: dict[int, int], q: float) -> float | None:
    """q-quantile of a histogram {value: count}."""
    total = sum(hist.values())
    if not total:
        return None
    acc = 0
    for value in sorted(hist):
        acc += hist[value]
        if acc >= q * total:
            return float(value)
    return float(max(hist))


def best_at(history: list[list[float]], t: float) -> float | None:
    """Best validation score reached by wall time t (history: (elapsed, best) on improvement)."""
    reached = [score for when, score in history if when <= t]
    return max(reached) if reached else None


def add_equal_time_scores(results: dict[str, list[dict]]) -> None:
    """For each seed, score every mode at the moment the fastest mode finished its budget."""
    seeds = {r["seed"] for rows in results.values() for r in rows}
    for seed in seeds:
        rows = [r for rows in results.values() for r in rows if r["seed"] == seed]
        horizon = min(r["wall_s"] for r in rows)
        for r in rows:
            r["best_at_equal_time"] = best_at(r["best_history"], horizon)


def _agg(rows: list[dict], key: str) -> tuple[float | None, float | None, float | None]:
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


QUALITY_REFERENCES = ("gepa", "sync")
"""Held-out quality is compared with the sequential loop: the real GEPA row when the bench ran it
(--peers gepa), else evotui's sync."""
_TIE = 1e-9


def paired_heldout(rows: list[dict], reference: list[dict]) -> dict | None:
    """A mode's held-out score against the reference's, seed by seed: the mean difference, its
    standard error, and the seeds it was better, worse and tied on. Seeds differ far more than
    modes do (which rules a run happens to find), so only pairing by seed can show a difference
    of a point; the medians and ranges beside it cannot. None without a seed both have scored."""
    ref = {r["seed"]: r["heldout_score"] for r in reference if r.get("heldout_score") is not None}
    diffs = [r["heldout_score"] - ref[r["seed"]] for r in rows
             if r.get("heldout_score") is not None and r["seed"] in ref]
    if not diffs:
        return None
    return {
        "mean_diff": statistics.mean(diffs),
        "se": statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None,
        "better": sum(d > _TIE for d in diffs),
        "worse": sum(d < -_TIE for d in diffs),
        "tied": sum(abs(d) <= _TIE for d in diffs),
        "seeds": len(diffs),
    }


def summarise(results: dict[str, list[dict]], profile: str, simulated: bool) -> list[dict]:
    def median_of(mode: str) -> float | None:
        return _agg(results.get(mode, []), "proposals_per_min")[0]

    def ratio(med: float | None, base: float | None) -> float | None:
        return med / base if med is not None and base else None

    bases = {"sync": median_of("sync"), "pxn": median_of("pxn"), "gepa": median_of("gepa"),
             "gepa_pxn": median_of("gepa-pxn")}
    quality_ref = next((m for m in QUALITY_REFERENCES if results.get(m)), None)

    def vs_reference(mode: str, rows: list[dict]) -> dict | None:
        paired = paired_heldout(rows, results[quality_ref]) if quality_ref not in (None, mode) else None
        return {"reference": quality_ref, **paired} if paired else None

    out = []
    for mode, rows in results.items():
        med, lo, hi = _agg(rows, "proposals_per_min")
        best, best_lo, best_hi = _agg(rows, "best_score")
        held, held_lo, held_hi = _agg(rows, "heldout_score")
        out.append({
            "mode": mode,
            "profile": profile,
            "simulated": simulated,
            "seeds": len(rows),
            "proposals_per_min": med,
            "proposals_per_min_min": lo,
            "proposals_per_min_max": hi,
            "settings": rows[0].get("settings", "") if rows else "",
            "peer": bool(rows and rows[0].get("peer")),
            "ratio_vs_sync": ratio(med, bases["sync"]),
            "ratio_vs_pxn": ratio(med, bases["pxn"]),
            # The real GEPA rows (bench --peers): sequential and PxNSampling(2, 4).
            "ratio_vs_gepa": ratio(med, bases["gepa"]),
            "ratio_vs_gepa_pxn": ratio(med, bases["gepa_pxn"]),
            "evaluated_per_min": _agg([{"v": r.get("evaluated", r["proposals"]) / r["pipeline_minutes"]}
                                       for r in rows if r.get("pipeline_minutes")], "v")[0],
            "preemptions": _agg(rows, "preemptions")[0],
            "utilization": _agg(rows, "utilization")[0],
            "throughput_utilization": _agg(rows, "throughput_utilization")[0],
            "tokens_generated": _agg(rows, "tokens_generated")[0],
            "tokens_wasted": _agg(rows, "tokens_wasted")[0],
            "best_score": best,
            "best_score_min": best_lo,
            "best_score_max": best_hi,
            "best_at_equal_time": _agg(rows, "best_at_equal_time")[0],
            # The final best re-scored on the held-out split (bench_quality.py: no selection bias).
            "heldout_score": held,
            "heldout_score_min": held_lo,
            "heldout_score_max": held_hi,
            "heldout_vs": vs_reference(mode, rows),
            "accepted": _agg(rows, "accepted")[0],
            "seed_score": _agg(rows, "seed_score")[0],
            "gap_p50": _agg(rows, "gap_p50")[0],
            "gap_p95": _agg(rows, "gap_p95")[0],
            "discarded_pct": _agg(rows, "discarded_pct")[0],
            "patched_pct": _agg(rows, "patched_pct")[0],
            "merges": _agg(rows, "merges")[0],
            "runs": rows,
        })
    return out


def _f(v, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


_RATIOS = (("x sync", "ratio_vs_sync"), ("x pxn", "ratio_vs_pxn"), ("x gepa", "ratio_vs_gepa"),
           ("x gpxn", "ratio_vs_gepa_pxn"))


def table(rows: list[dict], proposals: int, basis: str) -> str:
    ratios = [(head, key) for head, key in _RATIOS if any(r.get(key) is not None for r in rows)]
    lines = [
        f"evotui bench -- {'SIMULATED backend, profile ' + rows[0]['profile'] if rows[0]['simulated'] else 'real endpoint'}, "
        f"{proposals} proposals per run, {rows[0]['seeds']} seed(s); medians (min-max); throughput per {basis} minute",
        "best = best validation score at equal proposals; best@t = when the fastest mode finished; held = that best "
        "re-scored on the held-out split (evotui/bench/quality.py); acc = candidates validated into the pool; util = tokens generated / "
        "(elapsed x the backend's peak throughput); seqs = mean running requests / capacity; eval/min = evaluated "
        "proposals per minute; gap = version gap at consumption; disc/patch = % of checks; merge = merges accepted; "
        "* = the real library (bench --peers)",
        f"{'mode':17} {'proposals/min':>21} " + " ".join(f"{head:>6}" for head, _ in ratios)
        + f" {'util':>5} {'seqs':>5} {'best (min-max)':>19} {'best@t':>6} {'held (min-max)':>19} {'acc':>4} {'eval/min':>8} "
        f"{'tok gen':>8} {'wasted':>7} {'gap50/95':>8} {'disc%':>5} {'patch%':>6} {'merge':>5}",
    ]
    for r in rows:
        spread = f"{_f(r['proposals_per_min'])} ({_f(r['proposals_per_min_min'])}-{_f(r['proposals_per_min_max'])})"
        best = f"{_f(r['best_score'], '.3f')} ({_f(r['best_score_min'], '.2f')}-{_f(r['best_score_max'], '.2f')})"
        held = "-" if r.get("heldout_score") is None else (
            f"{_f(r['heldout_score'], '.3f')} ({_f(r['heldout_score_min'], '.2f')}-{_f(r['heldout_score_max'], '.2f')})")
        gaps = f"{_f(r['gap_p50'], '.0f')}/{_f(r['gap_p95'], '.0f')}"
        name = r["mode"] + ("*" if r.get("peer") else "")
        lines.append(
            f"{name:17} {spread:>21} " + " ".join(f"{_f(r.get(key)):>6}" for _, key in ratios)
            + f" {_f(r['throughput_utilization']):>5} {_f(r['utilization']):>5} {best:>19} "
            f"{_f(r['best_at_equal_time'], '.3f'):>6} {held:>19} {_f(r.get('accepted'), '.0f'):>4} {_f(r.get('evaluated_per_min')):>8} {_f(r['tokens_generated'], '.0f'):>8} "
            f"{_f(r['tokens_wasted'], '.0f'):>7} {gaps:>8} {_f(r['discarded_pct'], '.0f'):>5} {_f(r['patched_pct'], '.0f'):>6} "
            f"{_f(r['merges'], '.0f'):>5}"
        )
    lines += paired_lines(rows)
    lines.append("settings:")
    lines += [f"  {r['mode']:17} {r.get('settings') or '-'}" for r in rows]
    return "\n".join(lines)


def paired_lines(rows: list[dict]) -> list[str]:
    """The held-out comparison with the sequential reference, one line per mode."""
    paired = [(r["mode"], r["heldout_vs"]) for r in rows if r.get("heldout_vs")]
    if not paired:
        return []
    lines = [f"held-out vs {paired[0][1]['reference']}, paired by seed: mean difference +- standard error "
             "(seeds better/worse/tied)"]
    for mode, p in paired:
        se = f"+- {p['se']:.3f}" if p["se"] is not None else "(1 seed)"
        diff = round(p["mean_diff"], 3) + 0.0  # + 0.0: no "-0.000" for a rounding residue
        lines.append(f"  {mode:17} {diff:+.3f} {se:>9}  ({p['better']}/{p['worse']}/{p['tied']})")
    return lines


def plot(results: dict[str, list[dict]], width: int = 60, height: int = 12) -> str:
    """Best score over wall time, seed 0 of each mode, one marker letter per mode."""
    series = {m: rows[0]["best_history"] for m, rows in results.items() if rows and rows[0]["best_history"]}
    if not series:
        return ""
    t_max = max(max(t for t, _ in h) for h in series.values()) or 1.0
    lo = min(min(s for _, s in h) for h in series.values())
    hi = max(max(s for _, s in h) for h in series.values())
    span = (hi - lo) or 1.0
    grid = [[" "] * width for _ in range(height)]
    legend = []
    for n, (mode, hist) in enumerate(series.items()):
        mark = chr(ord("A") + n)
        legend.append(f"{mark}={mode}")
        for x in range(width):
            score = best_at(hist, t_max * x / (width - 1))
            if score is not None:
                y = height - 1 - round((score - lo) / span * (height - 1))
                grid[y][x] = mark if grid[y][x] == " " else "*"
    rows = [f"{hi - span * k / (height - 1):6.3f} |" + "".join(r) for k, r in enumerate(grid)]
    rows.append(" " * 7 + "+" + "-" * width)
    rows.append(" " * 8 + f"0{'wall seconds':^{width - 8}}{t_max:.0f}s")
    return "best validation score over time (seed 0; * = overlap)\n" + "\n".join(rows) + "\n" + "  ".join(legend)
