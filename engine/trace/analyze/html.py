"""The analysis as one self-contained HTML file: inline CSS and SVG plots, no external assets."""

from __future__ import annotations

import html
import json
from typing import Any

_CSS = ("body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child"
        "{text-align:left}svg{background:#fafafa;border:1px solid #ddd}code{font-size:90%}")


def _line_plot(xs: list[float], ys: list[float], title: str, step: bool = False) -> str:
    w, h, pad = 560, 200, 30
    if not xs:
        return f"<p>{html.escape(title)}: no data</p>"
    x0, x1 = min(xs), max(xs) or 1
    y0, y1 = min(ys), max(ys)
    sx = lambda x: pad + (x - x0) / ((x1 - x0) or 1) * (w - 2 * pad)  # noqa: E731
    sy = lambda y: h - pad - (y - y0) / ((y1 - y0) or 1) * (h - 2 * pad)  # noqa: E731
    pts: list[str] = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if step and i:
            pts.append(f"{sx(x):.1f},{sy(ys[i - 1]):.1f}")
        pts.append(f"{sx(x):.1f},{sy(y):.1f}")
    return (f'<svg width="{w}" height="{h}" role="img"><title>{html.escape(title)}</title>'
            f'<polyline fill="none" stroke="#2a6" stroke-width="2" points="{" ".join(pts)}"/>'
            f'<text x="{pad}" y="15" font-size="12">{html.escape(title)}</text>'
            f'<text x="2" y="{h - pad}" font-size="10">{y0:.3g}</text><text x="2" y="{pad}" font-size="10">{y1:.3g}</text>'
            f'<text x="{w - pad}" y="{h - 5}" font-size="10">{x1:g}</text></svg>')


def _bars(rows: list[tuple[str, float]], title: str) -> str:
    w, bh = 560, 18
    h = 24 + bh * len(rows)
    top = max((v for _, v in rows), default=1.0) or 1.0
    parts = [f'<svg width="{w}" height="{h}" role="img"><title>{html.escape(title)}</title>'
             f'<text x="4" y="14" font-size="12">{html.escape(title)}</text>']
    for i, (name, v) in enumerate(rows):
        y = 22 + i * bh
        parts.append(f'<text x="4" y="{y + 12}" font-size="11">{html.escape(name)}</text>'
                     f'<rect x="170" y="{y}" width="{v / top * 330:.1f}" height="{bh - 4}" fill="#36c"/>'
                     f'<text x="{175 + v / top * 330:.1f}" y="{y + 12}" font-size="10">{v:.3g}</text>')
    return "".join(parts) + "</svg>"


def render(result: dict[str, Any]) -> str:
    lin, cyc, et = result["lineage"], result["cycling"], result.get("edit_types")
    body = [f"<h1>evotui analysis: {html.escape(result['run_id'])}</h1>",
            f"<p>task {html.escape(str(result['task']))}, status {html.escape(str(result['status']))}</p>",
            "<h2>Lineage</h2>"]
    if lin.get("best_id"):
        keys = ("proposals", "best_id", "best_score", "best_depth", "dead_branch_share", "proposals_to_best",
                "time_to_best_s", "jackpot_then_flat")
        body.append("<table>" + "".join(f"<tr><td>{k}</td><td>{html.escape(str(lin[k]))}</td></tr>" for k in keys) + "</table>")
        tl = lin["timeline"] + [{"proposal": lin["proposals"], "score": lin["timeline"][-1]["score"]}]
        body.append(_line_plot([t["proposal"] for t in tl], [t["score"] for t in tl], "best-so-far score by proposal", step=True))
    body.append("<h2>Cycling</h2>")
    body.append(f"<p>{cyc['recycled_lines']} of {cyc['added_lines']} added lines re-introduce deleted ones "
                f"(rate {cyc['recycle_rate']:.3f}): literal {cyc['by_class']['literal']}, tuning "
                f"{cyc['by_class']['tuning']}, trivial {cyc['by_class']['trivial']}</p>")
    gens = cyc["per_generation"]
    body.append(_line_plot([g["generation"] for g in gens], [g["rate"] for g in gens], "recycle rate by generation"))
    body.append("<table><tr><th>line</th><th>class</th><th>count</th></tr>" + "".join(
        f"<tr><td><code>{html.escape(t['line'])}</code></td><td>{t['class']}</td><td>{t['count']}</td></tr>"
        for t in cyc["top_lines"]) + "</table>")
    if et is not None:
        body.append(f"<h2>Edit types</h2><p>judge {html.escape(str(et['judge_model']))}: {et['edits']} edits, "
                    f"{et['judge_calls']} LLM calls, {et['cached']} cached</p>")
        body.append(_bars([(r["label"], r["prevalence"]) for r in et["labels"]], "prevalence"))
        body.append(_bars([(r["label"], r["odds_ratio"]) for r in et["labels"] if r["odds_ratio"] is not None], "odds ratio of improving the parent"))
    ho = result.get("heldout")
    if ho is not None and ho.get("available"):
        body.append(f"<h2>Held-out check</h2><p>{html.escape(ho['source'])}: <b>{html.escape(ho['label'])}</b> "
                    f"(public gain {ho['public_gain']:.4g}, held-out gain {html.escape(str(ho['heldout_gain']))})</p>")
        pts = [s for s in ho["chain"] if s["heldout"] is not None]
        body.append(_line_plot([s["proposal"] for s in pts], [s["heldout"] for s in pts], "held-out score of the best-so-far chain", step=True))
    elif ho is not None:
        body.append(f"<h2>Held-out check</h2><p>not available: {html.escape(ho['reason'])}</p>")
    data = html.escape(json.dumps({k: v for k, v in result.items()}, default=str))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>evotui analysis {html.escape(result['run_id'])}"
            f"</title><style>{_CSS}</style></head><body>{''.join(body)}"
            f"<details><summary>data (JSON)</summary><pre>{data}</pre></details></body></html>\n")
