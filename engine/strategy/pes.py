"""LoongFlow's Plan-Execute-Summarize agents as strategy stages (engine/strategy/protocols.py).

- **planner** (before propose, its own workers): reads the parent's lineage — the parent and its
  first-parent ancestors, at most `lineage_depth` generations, oldest first so the prompt's
  prefix stays stable along a lineage — with each generation's score, plan (intent) and summary
  (retrospective insight), and writes a plan that continues the trajectory and avoids the
  pitfalls the summaries verified.
- **executor**: the task kind's own propose stage. The plan reaches it as guidance; its patch
  retries (a reply that does not apply is re-asked) and, on program tasks, the validate stage
  (syntax, EVOLVE-BLOCK, imports, a bounded fix-retry) are the executor's fast local verification
  loop before the expensive evaluation.
- **summarizer** (after evaluate): compares the plan with the result (child vs parent score and
  a short line diff) and writes an abductive insight, stored on the child (notes "summary") for
  later planners.

A failed call or a malformed answer (empty, only code, too short) is never adopted: the item
gets a `plan_fallback` / `summary_fallback` note instead (counted by `evotui show`) and the cycle
goes on as the kind's plain proposal, as LoongFlow's executor falls back.

A plan carries the pool version it was made from (`plan_version`). Right before the proposer
sees it, its gap to the current pool goes through the run's staleness policy
(engine/stages/strategy_stages.py): full uses it, guarded drops it and plans again, reflective
revises it with what changed in the pool since (revise.py, stage `plan_revise`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Mapping

from engine.pool import Artifact, PoolError
from engine.strategy.protocols import StageView, StrategyEnv, StrategyStage
from engine.strategy.revise import revise_note

PLANNER_MARKER = "evotui-pes-planner:"
SUMMARIZER_MARKER = "evotui-pes-summarizer:"
"""Marker lines of the two system prompts (the simulator recognises the prompts by them;
engine/llm/sim/pes_agents.py keeps its own copy, as the simulator imports no strategy)."""

NOTE_CAP = 1200
"""Most characters of a plan or summary kept (a longer answer is cut, not refused)."""
MIN_WORDS = 3
TEXT_CAP = 6000
"""Most characters of the parent's text shown to the planner (its head and tail)."""
DIFF_LINES = 40

_FENCED = re.compile(r"```.*?(```|\Z)", re.S)
_LABEL = {"plan": re.compile(r"^\s*\**\s*plan\s*\**\s*:\s*", re.I | re.M),
          "summary": re.compile(r"^\s*\**\s*(summary|insight)\s*\**\s*:\s*", re.I | re.M)}


@dataclass(frozen=True)
class Generation:
    """One generation of a lineage as the planner reads it."""

    artifact_id: str
    score: float
    plan: str | None
    summary: str | None


def lineage(view: StageView, env: StrategyEnv, depth: int) -> list[Generation]:
    """The parent and its first-parent ancestors, at most `depth` generations, oldest first. An
    ancestor no longer in the pool ends the walk (the rest is unknown, not an error)."""
    chain: list[Artifact] = [view.parent]
    while len(chain) < depth and chain[-1].parent_ids:
        try:
            chain.append(env.archive.get(chain[-1].parent_ids[0]))
        except PoolError:
            break
    out = []
    for art in reversed(chain):
        notes = art.meta.get("notes") if isinstance(art.meta, Mapping) else None
        notes = notes if isinstance(notes, Mapping) else {}
        out.append(Generation(art.artifact_id, art.val_mean,
                              _str_or_none(notes.get("plan")), _str_or_none(notes.get("summary"))))
    return out


def _str_or_none(v: object) -> str | None:
    return str(v) if isinstance(v, str) and v.strip() else None


def _clip(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n... ({len(text) - cap} characters left out) ...\n{text[-half:]}"


def planner_messages(view: StageView, description: str, history: list[Generation]) -> list[dict]:
    system = (f"{PLANNER_MARKER} plan the next improvement\n"
              "You are the planner of an evolutionary search. Read the lineage of the solution to "
              "improve (oldest first: each generation's score, the plan it followed and what was "
              "learned) and write a short plan for the next change: continue what worked, avoid the "
              "pitfalls the summaries verified. Do not write the solution itself.\n"
              "Answer with a line `PLAN:` followed by at most five short steps.")
    lines = [f"Task: {description.strip()}", "", "## Lineage (oldest first)"]
    for n, g in enumerate(history, 1):
        lines.append(f"{n}. {g.artifact_id} score {g.score:.6g}")
        if g.plan:
            lines.append(f"   plan: {_one_line(g.plan)}")
        if g.summary:
            lines.append(f"   summary: {_one_line(g.summary)}")
    lines += ["", f"## Solution to improve ({view.parent.artifact_id}, score {view.parent.val_mean:.6g})",
              "```", _clip(view.parent.text, TEXT_CAP), "```"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def _one_line(text: str, cap: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= cap else flat[: cap - 3] + "..."


def short_diff(parent: str, child: str, cap: int = DIFF_LINES) -> str:
    lines = [ln.rstrip("\n") for ln in difflib.unified_diff(parent.splitlines(), child.splitlines(),
                                                             "parent", "child", n=0, lineterm="")]
    body = [ln for ln in lines if not ln.startswith(("---", "+++", "@@"))]
    if len(body) > cap:
        body = body[:cap] + [f"... ({len(body) - cap} more changed lines)"]
    return "\n".join(body) or "(no textual change)"


def summarizer_messages(view: StageView, description: str) -> list[dict]:
    system = (f"{SUMMARIZER_MARKER} compare intent and result\n"
              "You are the summarizer of an evolutionary search. Compare the plan (the intent) with "
              "the result (the score change and the diff) and state in one or two sentences why the "
              "change helped or hurt, and what the next generation should do or avoid.\n"
              "Answer with a line `SUMMARY:` followed by the insight.")
    parent_score = view.parent.val_mean
    child_score = view.child_score
    result = ("not scored" if child_score is None else
              f"{parent_score:.6g} -> {child_score:.6g} ({_verdict(parent_score, child_score)})")
    plan = view.notes.get("plan") or "(no plan: the proposer worked unguided)"
    user = "\n".join([f"Task: {description.strip()}", "", "## Plan", plan, "", "## Result",
                      f"score {result}", "", "## Diff (parent -> child)", "```diff",
                      short_diff(view.parent.text, view.child or ""), "```"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _verdict(parent: float, child: float) -> str:
    return "improved" if child > parent else "unchanged" if child == parent else "worse"


def parse_note(reply: str | None, label: str) -> tuple[str | None, str]:
    """(the note, "") if the reply is usable, else (None, why not). Code blocks are not a plan or
    an insight and are dropped; the text after a `PLAN:`/`SUMMARY:` label is taken if there is
    one, else the whole remaining reply."""
    if reply is None:
        return None, "the call failed"
    prose = _FENCED.sub("", reply).strip()
    m = _LABEL[label].search(prose)
    if m:
        prose = prose[m.end():].strip()
    if not prose:
        return None, "empty answer" if not reply.strip() else "no prose outside code"
    if len(prose.split()) < MIN_WORDS:
        return None, f"too short ({len(prose.split())} words)"
    return (prose if len(prose) <= NOTE_CAP else prose[: NOTE_CAP - 3] + "..."), ""


def pes_stages(depth: int = 4, planner_workers: int = 4, summarizer_workers: int = 4) -> tuple[StrategyStage, ...]:
    async def plan(view: StageView, env: StrategyEnv) -> dict[str, str]:
        made = env.archive.version
        reply = await env.ask(planner_messages(view, env.description, lineage(view, env, depth)), "plan")
        note, why = parse_note(reply, "plan")
        if note is None:
            return {"plan_fallback": f"no plan ({why}); plain proposal"}
        return {"plan": note, "plan_version": str(made)}

    async def revise(view: StageView, env: StrategyEnv) -> dict[str, str]:
        revised, now = await revise_note(view, env, key="plan", what="plan", stage="plan_revise")
        if revised is None:
            return {}
        note, why = parse_note(revised, "plan")
        return {"plan": note, "plan_version": str(now)} if note is not None else {}

    async def summarize(view: StageView, env: StrategyEnv) -> dict[str, str]:
        reply = await env.ask(summarizer_messages(view, env.description), "summarize")
        note, why = parse_note(reply, "summary")
        return {"summary": note} if note is not None else {"summary_fallback": f"no summary ({why})"}

    return (StrategyStage("plan", "before_propose", plan, workers=planner_workers, calls=2, guides=("plan",),
                          version_key="plan_version", revise=revise),
            StrategyStage("summarize", "after_evaluate", summarize, workers=summarizer_workers))
