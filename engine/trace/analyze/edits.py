"""Edit types (paper §5.1, B.4): an LLM judge labels each parent -> child diff of the pool with the
nine-label multi-label taxonomy; prevalence, helpfulness (odds ratio of improving the parent) and
enrichment on best-so-far and final-lineage edits per label. Answers are cached in the database
(judge_labels, schema v5) by a hash of the prompt version, judge model and diff."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from engine.code.patches import unified_diff
from engine.llm.client import LLMClient
from engine.llm.errors import LLMError
from engine.store.store import Store
from engine.trace.analyze import lineage
from engine.trace.errors import TraceError
from engine.trace.model import Trace

LABELS = ("hyperparameter_tuning", "local_refinement", "architectural_change", "composition", "efficiency",
          "bug_fix", "pruning", "refactor", "external_dependency")
UNKNOWN = "unknown"
DIFF_CAP = 16_000
PROMPT_VERSION = "edit-judge-v1"
CONTINUITY = 0.5
SYSTEM = f"""evotui-edit-judge: {PROMPT_VERSION}
You label one code edit (a unified diff from a parent program to its child) with every edit type
that applies, from this fixed list:
- hyperparameter_tuning: numeric literals or configuration values change; control flow unchanged.
- local_refinement: a targeted edit inside an existing routine; its role and structure are kept.
- architectural_change: a core algorithmic block is replaced by a substantively different approach.
- composition: a new component (operator, phase, branch, function) is added alongside existing logic.
- efficiency: same input-output behaviour at lower cost (vectorisation, caching, batching).
- bug_fix: a latent defect is corrected (missing guard, wrong sign, off-by-one).
- pruning: a code path, phase or feature is removed; the rest is kept.
- refactor: behaviour-preserving restructuring (renames, reordering, extracted helpers, comments).
- external_dependency: an import or external library is introduced or removed.
Answer with a JSON list of label strings and nothing else, e.g. ["hyperparameter_tuning"]."""
RETRY = "Your answer was not a JSON list of labels. Answer again with only a JSON list, e.g. [\"refactor\"]."
_LIST = re.compile(r"\[[^\[\]]*\]", re.S)


def parse_labels(text: str) -> list[str] | None:
    """The labels of a judge answer (a JSON list, or an object with "labels"), or None."""
    for candidate in [text.strip(), *(_LIST.findall(text) or [])]:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            value = value.get("labels")
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            found = sorted({v.strip().lower() for v in value} & set(LABELS))
            if found or not value:
                return found
    return None


def odds_ratio(a: int, b: int, c: int, d: int) -> float:
    """Improved with / without the label (a, c) against not improved with / without (b, d), with
    the 0.5 continuity correction so an empty cell gives a finite ratio."""
    return ((a + CONTINUITY) * (d + CONTINUITY)) / ((b + CONTINUITY) * (c + CONTINUITY))


@dataclass
class Edit:
    parent_id: str
    child_id: str
    diff: str
    improved: bool
    key: str = ""
    labels: list[str] = field(default_factory=list)


def edits_of(trace: Trace, model: str) -> list[Edit]:
    by_id = trace.by_id()
    out = []
    for e in trace.edges:
        parent, child = by_id.get(e["parent_id"]), by_id.get(e["child_id"])
        if not parent or not child or parent["source"] is None or child["source"] is None:
            continue
        diff = unified_diff(parent["source"], child["source"], e["parent_id"], e["child_id"])[:DIFF_CAP]
        improved = (child["val_mean"] is not None and parent["val_mean"] is not None
                    and child["val_mean"] > parent["val_mean"])
        key = hashlib.sha256(f"{PROMPT_VERSION}\0{model}\0{diff}".encode()).hexdigest()
        out.append(Edit(e["parent_id"], e["child_id"], diff, improved, key))
    return out


@dataclass
class JudgeStats:
    calls: int = 0
    cached: int = 0
    judged: int = 0
    invalid_answers: int = 0
    unknown: int = 0


async def _judge_one(client: LLMClient, edit: Edit, stats: JudgeStats) -> tuple[list[str], int]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": edit.diff}]
    invalid = 0
    for attempt in range(2):  # the answer, then one re-ask
        try:
            res = await client.chat(messages, stage="analyze", temperature=0.0)
        except LLMError as exc:
            if exc.fatal:
                raise TraceError(f"judge endpoint unusable: {exc}") from None
            stats.calls += 1
            return [UNKNOWN], invalid
        stats.calls += 1
        labels = parse_labels(res.text)
        if labels is not None:
            return labels or [UNKNOWN], invalid
        invalid += 1
        stats.invalid_answers += 1
        messages = [*messages, {"role": "assistant", "content": res.text}, {"role": "user", "content": RETRY}]
    stats.unknown += 1
    return [UNKNOWN], invalid


async def label(store: Store, edits: list[Edit], client_factory, model: str, concurrency: int = 8) -> JudgeStats:
    """Fill edit.labels from the cache, asking the judge (client_factory()) only for the rest."""
    stats = JudgeStats()
    cached = await store.judge_labels(sorted({e.key for e in edits}))
    todo: dict[str, list[Edit]] = {}
    for e in edits:
        if e.key in cached:
            e.labels = cached[e.key]
            stats.cached += 1
        else:
            todo.setdefault(e.key, []).append(e)
    if not todo:
        return stats
    client: LLMClient = client_factory()
    sem = asyncio.Semaphore(concurrency)

    async def one(group: list[Edit]) -> None:
        async with sem:
            labels, invalid = await _judge_one(client, group[0], stats)
        for e in group:
            e.labels = labels
        stats.judged += 1
        store.put_judge_labels(group[0].key, model=model, labels=labels, invalid_answers=invalid,
                               created_at=time.time())

    try:
        await asyncio.gather(*(one(g) for g in todo.values()))
    finally:
        await client.aclose()
        await store.flush()
    return stats


def summarise(trace: Trace, edits: list[Edit], stats: JudgeStats) -> dict[str, Any]:
    best = lineage.best_of(trace)
    final = lineage.ancestors(trace, best["candidate_id"]) if best else set()
    bsf = {t["candidate_id"] for t in lineage.analyze(trace).get("timeline", [])}
    n = len(edits)
    rows = []
    for name in (*LABELS, UNKNOWN):
        has = [e for e in edits if name in e.labels]
        if name == UNKNOWN and not has:
            continue
        a = sum(e.improved for e in has)
        b = len(has) - a
        c = sum(e.improved for e in edits if name not in e.labels)
        d = n - len(has) - c
        base = len(has) / n if n else 0.0
        sub_b = [e for e in edits if e.child_id in bsf]
        sub_f = [e for e in edits if e.child_id in final and e.parent_id in final]
        rows.append({
            "label": name, "edits": len(has), "prevalence": round(base, 4),
            "improved": a, "odds_ratio": round(odds_ratio(a, b, c, d), 3) if has else None,
            "enrichment_best_so_far": _enrich(sub_b, name, base),
            "enrichment_final_lineage": _enrich(sub_f, name, base)})
    multi = sum(len(e.labels) > 1 for e in edits)
    return {"edits": n, "improved": sum(e.improved for e in edits), "multi_label_share": round(multi / n, 4) if n else 0.0,
            "judge_calls": stats.calls, "cached": stats.cached, "judged": stats.judged,
            "invalid_answers": stats.invalid_answers, "unknown": stats.unknown, "labels": rows,
            "per_edit": [{"parent_id": e.parent_id, "child_id": e.child_id, "labels": e.labels,
                          "improved": e.improved} for e in edits]}


def _enrich(subset: list[Edit], name: str, base: float) -> float | None:
    if not subset or base == 0:
        return None
    return round(sum(name in e.labels for e in subset) / len(subset) / base, 3)
