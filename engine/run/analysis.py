"""A read-only analysis of a live or finished run for observers (the TUI's analysis screen):
the best-so-far timeline and the cycling figures of `evotui analyze` (engine/trace/analyze), and
the edit types only as far as the judge's answers are already cached (no LLM call is made here;
`evotui analyze` fills the cache). Also the recycled lines of one artifact, for marking a diff.

`analyze_run` reads the store (async) and computes off the event loop (the analyses are CPU work).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from engine.code.deleted_lines import Memory, line_changes
from engine.store.store import Store
from engine.trace import collect
from engine.trace.analyze import cycling, edits, lineage
from engine.trace.llm import Choice, endpoint_config
from engine.trace.model import Trace


@dataclass(frozen=True)
class BestStep:
    proposal: int
    candidate_id: str
    score: float | None


@dataclass(frozen=True)
class RecycleGeneration:
    generation: int
    rate: float
    recycled: int
    added: int


@dataclass(frozen=True)
class EditTypeCount:
    label: str
    edits: int
    prevalence: float
    odds_ratio: float | None


@dataclass(frozen=True)
class RunAnalysis:
    run_id: str
    proposals: int
    best_id: str | None
    best_score: float | None
    timeline: tuple[BestStep, ...]
    """Best-so-far steps by proposal number (the seed at 0)."""
    recycle_rate: float
    recycled_lines: int
    added_lines: int
    by_class: Mapping[str, int]
    per_generation: tuple[RecycleGeneration, ...]
    edit_types: tuple[EditTypeCount, ...]
    edits_labelled: int
    """Edits with a cached judge answer (0: run `evotui analyze` to label them)."""
    edits_total: int
    top_lines: tuple[tuple[str, str, int], ...] = ()
    """The most recycled lines: (normalised line, class, times)."""


def summarise(trace: Trace, labels: Mapping[str, list[str]], model: str) -> RunAnalysis:
    """The analysis of a collected trace, given the judge's cached answers by key."""
    lin = lineage.analyze(trace)
    cyc = cycling.analyze(trace)
    found = edits.edits_of(trace, model)
    labelled = [e for e in found if e.key in labels]
    for e in labelled:
        e.labels = list(labels[e.key])
    types: tuple[EditTypeCount, ...] = ()
    if labelled:
        rows = edits.summarise(trace, labelled, edits.JudgeStats(cached=len(labelled)))["labels"]
        types = tuple(EditTypeCount(r["label"], r["edits"], r["prevalence"], r["odds_ratio"]) for r in rows)
    return RunAnalysis(
        run_id=trace.run["run_id"], proposals=lin["proposals"], best_id=lin.get("best_id"),
        best_score=lin.get("best_score"),
        timeline=tuple(BestStep(t["proposal"], t["candidate_id"], t["score"]) for t in lin.get("timeline", [])),
        recycle_rate=cyc["recycle_rate"], recycled_lines=cyc["recycled_lines"], added_lines=cyc["added_lines"],
        by_class=dict(cyc["by_class"]),
        per_generation=tuple(RecycleGeneration(g["generation"], g["rate"], g["recycled"], g["added"])
                             for g in cyc["per_generation"]),
        edit_types=types, edits_labelled=len(labelled), edits_total=len(found),
        top_lines=tuple((t["line"], t["class"], t["count"]) for t in cyc["top_lines"]))


async def analyze_run(db_path: Path | str, run_id: str) -> RunAnalysis:
    """Read the run from its database (read-only, so a driving process keeps writing) and analyse it."""
    store = await Store.open(db_path, create=False, readonly=True)
    try:
        trace = await collect.collect(store, run_id)
        model = endpoint_config(trace.run.get("config") or {}, "reflection_llm", Choice()).model
        keys = sorted({e.key for e in edits.edits_of(trace, model)})
        labels = await store.judge_labels(keys)
    finally:
        await store.close()
    return await asyncio.to_thread(summarise, trace, labels, model)


def recycled_lines(text_of: Callable[[str], str | None], parent_of: Callable[[str], str | None],
                   artifact_id: str) -> dict[str, str]:
    """The lines artifact_id added (against its first parent) that its lineage deleted before,
    each with its recycling class (literal / tuning / trivial), by the stripped line."""
    chain: list[str] = []
    cur: str | None = artifact_id
    while cur is not None and cur not in chain and text_of(cur) is not None:
        chain.append(cur)
        cur = parent_of(cur)
    chain.reverse()  # the oldest known ancestor first
    memory = Memory()
    out: dict[str, str] = {}
    for parent, child in zip(chain, chain[1:]):
        added, removed = line_changes(text_of(parent) or "", text_of(child) or "")
        if child == artifact_id:
            for line in added:
                kind = memory.classify(line)
                if kind:
                    out[line.strip()] = kind
        memory = memory.plus(removed)
    return out


