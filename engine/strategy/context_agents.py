"""ContextEvolve's three context agents as strategy stages (engine/strategy/protocols.py).

- Navigator (before propose): m buffer transitions sampled by category -> directional, abstract
  guidance ("guidance"), shared by items made within `guidance_refresh` pool versions of it
  ("guidance_version" names the version it was made from).
- Sampler (before propose): the buffer's summaries and scores, the parent summary and the
  guidance -> a few diverse exemplars ("exemplars": ids, scores, summaries, a digest of their
  change; with `exemplars_as_code` also an excerpt of each one's code, so the generator sees the
  demonstrations themselves, at a measured token cost: README "Strategies").
- Summarizer (after evaluation): the parent summary and the child's code (eq. 4 of the paper,
  bounded by CODE_CHARS), with the diff from the parent as a pointer to what changed -> what is
  new and which parent traits it preserves ("summary"), so summaries chain from parent to child.

Failed candidates (no score: the patch did not apply, a filter refused it, the evaluator
crashed) reach the Navigator as "failed" transitions with their reason: the strategy's
`item_ended` hook feeds them to `failures` (evolve_buffer.FailureLog, rebuilt on resume from the
stored items). Guidance carries the pool version it was made from ("guidance_version"); stale
guidance goes through the staleness policy before the proposer sees it (`revise_guidance` for
the reflective policy, stage `navigate_revise`; guarded navigates again, without sharing).

Every agent's system message starts with a marker line (the simulator recognises them by it). A
failed call, an empty or malformed answer or only unknown exemplar ids: counted in `stats` and a
deterministic fallback (no guidance, a fixed exemplar pick, a summary from the diff); never a crash.
"""

from __future__ import annotations

import asyncio
import difflib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from engine.pool import Artifact
from engine.strategy.evolve_buffer import (EvolveBuffer, FailureLog, SharedGuidance, Transition, buffer_of,
                                           diff_digest, sample_by_category, short, summary_of)
from engine.strategy.protocols import EndedItem, StageView, StrategyEnv
from engine.strategy.revise import Change, revise_note

SUMMARIZER_MARKER = "evotui-context-summarizer:"
NAVIGATOR_MARKER = "evotui-context-navigator:"
SAMPLER_MARKER = "evotui-context-sampler:"

DIFF_CHARS = 3000
"""Most characters of the child's diff the Summarizer reads."""
CODE_CHARS = 6000
"""Most characters of the child's code the Summarizer reads (head and tail of a longer one)."""
EXEMPLAR_CODE_CHARS = 1500
"""Most characters of an exemplar's code in the generator's prompt (exemplars_as_code)."""
NOTE_BUDGET = 4000
"""The proposer shows a note's first 4000 characters (engine/stages/strategy_stages.NOTE_CHARS,
which this layer may not import): code excerpts share what the summaries leave of it."""
MIN_EXCERPT = 200
"""A shorter excerpt than this shows too little code to be worth its tokens; none is added."""
SUMMARY_CHARS = 800
GUIDANCE_CHARS = 1500
DESCRIPTION_CHARS = 1500


@dataclass(frozen=True)
class ContextEvolveSettings:
    """[strategy.contextevolve] (engine/strategy/contextevolve.py: ContextEvolveOptions validates and mirrors it)."""

    selection: str = "tournament"
    navigator_samples: int = 6
    weight_improvement: float = 0.5
    weight_mixed: float = 0.2
    weight_decline: float = 0.3
    guidance_refresh: int = 4
    exemplars: int = 3
    sampler_candidates: int = 24
    workers: int = 2
    exemplars_as_code: bool = False

    @property
    def weights(self) -> dict[str, float]:
        return {"improvement": self.weight_improvement, "mixed": self.weight_mixed, "decline": self.weight_decline}


@dataclass
class AgentStats:
    """What the agents did in this process (in memory; the notes in the pool are the record)."""

    calls: Counter = field(default_factory=Counter)
    fallbacks: Counter = field(default_factory=Counter)
    shared_guidance: int = 0
    unknown_ids: int = 0


def _item_rng(view: StageView, agent: str) -> random.Random:
    # Per item and agent, so a pick does not depend on which items ran first (str seeds are stable).
    return random.Random(f"{view.item_id}:{agent}")


def _score(x: float) -> str:
    return f"{x:.6g}"


def bounded(text: str, limit: int) -> str:
    """text, or its head and tail with the cut named (the end of a program is often its entry point)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


_EVOLVE = re.compile(r"EVOLVE-BLOCK-START[^\n]*\n(.*)\n[^\n]*EVOLVE-BLOCK-END", re.S)


def code_excerpt(text: str, limit: int) -> str:
    """The part of a candidate that evolves (its EVOLVE-BLOCK regions, else all of it), bounded."""
    m = _EVOLVE.search(text)
    return bounded(m.group(1) if m else text, limit)


# -- Summarizer --------------------------------------------------------------------------------
def summarizer_messages(parent_summary: str, parent_score: float, child_score: float | None, diff: str,
                        child_code: str = "") -> list[dict]:
    system = (f"{SUMMARIZER_MARKER} summarise a candidate as a state abstract.\n"
              "You write a concise abstract (at most 4 sentences) of the new candidate: what is new in it "
              "compared with its parent AND which of the parent's traits it preserves. Describe ideas, not code. "
              "Answer as two lines:\nNEW: ...\nPRESERVES: ...")
    score = "not evaluated" if child_score is None else _score(child_score)
    user = (f"## Parent summary\n{parent_summary or '(none: the parent is the initial candidate)'}\n\n"
            f"## Scores\nparent {_score(parent_score)}, candidate {score}\n\n"
            + (f"## The candidate's code\n```\n{bounded(child_code, CODE_CHARS)}\n```\n\n" if child_code else "")
            + f"## Change from the parent to the candidate\n```diff\n{diff[:DIFF_CHARS]}\n```")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def fallback_summary(parent_summary: str, diff: str) -> str:
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    kept = short(parent_summary, 30) if parent_summary else "the initial candidate's approach"
    return f"NEW: {added} lines added, {removed} removed (no abstract available).\nPRESERVES: {kept}"


def unified(parent: str, child: str) -> str:
    return "".join(difflib.unified_diff(parent.splitlines(True), child.splitlines(True), "parent", "candidate", n=1))


# -- Navigator ---------------------------------------------------------------------------------
def navigator_messages(description: str, parent_summary: str, sample: list[Transition]) -> list[dict]:
    system = (f"{NAVIGATOR_MARKER} distil a search direction from past transitions.\n"
              "You read transitions of an evolutionary search (a parent's abstract, its child's abstract, the "
              "score change, labelled improvement / mixed / decline) and write directional, abstract guidance for "
              "the next change: which kinds of change helped, which hurt, which regions look unexplored. "
              "Never give step-by-step instructions or code. At most 6 short lines.")
    lines = []
    for t in sample:
        result = (f"not scored ({t.failure})" if t.category == "failed" else
                  f"{_score(t.child_score)} (delta {t.delta:+.4g})")
        # One line per summary (a summary has a NEW and a PRESERVES line), so each transition
        # reads as three lines.
        before, after = " ".join(t.parent_summary.split()), " ".join(t.child_summary.split())
        lines.append(f"- [{t.category}] {t.parent_id} -> {t.child_id}: score {_score(t.parent_score)} -> "
                     f"{result}\n  before: {before or '(initial)'}\n  after: {after}")
    user = (f"## Task\n{description[:DESCRIPTION_CHARS]}\n\n## Parent being improved\n"
            f"{parent_summary or '(the initial candidate, or not yet summarised)'}\n\n## Transitions\n" + "\n".join(lines))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# -- Sampler -----------------------------------------------------------------------------------
def sampler_candidates(buf: EvolveBuffer, parent_id: str, limit: int) -> list[Artifact]:
    """The artifacts the Sampler chooses among: the best half and the newest half of `limit`."""
    arts = [a for a in buf.artifacts() if a.artifact_id != parent_id]
    if len(arts) <= limit:
        return sorted(arts, key=lambda a: (a.created_version, a.artifact_id))
    best = sorted(arts, key=lambda a: (-a.val_mean, a.created_version))[: limit // 2]
    seen = {a.artifact_id for a in best}
    newest = [a for a in sorted(arts, key=lambda a: (-a.created_version, a.artifact_id)) if a.artifact_id not in seen]
    return sorted([*best, *newest[: limit - len(best)]], key=lambda a: (a.created_version, a.artifact_id))


def _label(a: Artifact) -> str:
    if not a.parent_ids and not summary_of(a):
        return "(the initial candidate)"
    return summary_of(a) or f"(unsummarised) {diff_digest(a)}".strip()


SAMPLER_FAILURES = 3
"""Newest failed candidates the Sampler is shown (not selectable: they have no score)."""


def sampler_messages(parent: Artifact, guidance: str, candidates: list[Artifact], k: int,
                     failures: list[Transition] | None = None) -> list[dict]:
    system = (f"{SAMPLER_MARKER} choose few-shot exemplars.\n"
              f"Pick up to {k} exemplars for the next change of the parent: relevant to the parent and the "
              "guidance, diverse among themselves, with proven outcomes, and include a low-scoring one when it "
              "is novel; avoid exemplars whose approach the recent failures share. Answer with one line: "
              "EXEMPLARS: id, id, ...")
    rows = "\n".join(f"- {a.artifact_id} | score {_score(a.val_mean)} | {_label(a)}" for a in candidates)
    failed = "\n".join(f"- {t.child_id} (failed, from {t.parent_id}): {t.failure} | {' '.join(t.child_summary.split())}"
                       for t in (failures or [])[-SAMPLER_FAILURES:])
    user = (f"## Parent {parent.artifact_id} (score {_score(parent.val_mean)})\n{summary_of(parent) or '(no summary)'}\n\n"
            f"## Guidance\n{guidance or '(none)'}\n\n## Candidates\n{rows}\n\n"
            + (f"## Recent failed candidates (not selectable)\n{failed}\n\n" if failed else "") + f"Pick up to {k}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_ID = re.compile(r"[A-Za-z][A-Za-z_-]*\d+")


def parse_exemplars(reply: str, known: set[str], k: int) -> tuple[list[str], int]:
    """The known ids the reply names (first k, no repeats) and how many named ids are unknown."""
    m = re.search(r"EXEMPLARS?\s*:(.*)", reply, re.I | re.S)
    text = m.group(1) if m else reply
    picked, unknown = [], 0
    for token in _ID.findall(text):
        if token in known:
            if token not in picked:
                picked.append(token)
        else:
            unknown += 1
    return picked[:k], unknown


def fallback_exemplars(candidates: list[Artifact], transitions: list[Transition], k: int) -> list[str]:
    """Deterministic: the best, the newest improvement, the lowest scorer (novel or not), then newest."""
    if not candidates:
        return []
    ids = {a.artifact_id for a in candidates}
    order = [max(candidates, key=lambda a: (a.val_mean, -a.created_version)).artifact_id]
    improved = [t.child_id for t in transitions if t.category == "improvement" and t.child_id in ids]
    order += improved[-1:]
    order.append(min(candidates, key=lambda a: (a.val_mean, -a.created_version)).artifact_id)
    order += [a.artifact_id for a in sorted(candidates, key=lambda a: -a.created_version)]
    return list(dict.fromkeys(order))[:k]


def exemplars_note(buf: EvolveBuffer, ids: list[str], code_chars: int = 0) -> str:
    """One entry per exemplar: id, score, summary, change digest; with code_chars an excerpt of its
    code too (a fenced block, so it reads as a demonstration, not as the program to edit)."""
    arts = [a for a in (buf.get(aid) for aid in ids) if a is not None]
    lines = []
    for art in arts:
        change = diff_digest(art, 300)
        lines.append(f"- {art.artifact_id} (score {_score(art.val_mean)}): {_label(art)}"
                     + (f"\n  change: {change}" if change else ""))
    if code_chars > 0 and arts:
        heads = [f"\n  code of {a.artifact_id}:\n```\n" for a in arts]
        # Whatever the summaries leave of the note's budget, shared evenly (cuts are named).
        spare = NOTE_BUDGET - len("\n".join(lines)) - sum(len(h) + 4 + 60 for h in heads)
        per = min(code_chars, spare // len(arts))
        if per >= MIN_EXCERPT:
            lines = [f"{line}{head}{code_excerpt(a.text, per)}\n```" for line, head, a in zip(lines, heads, arts)]
    return "\n".join(lines)


# -- the stages --------------------------------------------------------------------------------
class ContextAgents:
    def __init__(self, settings: ContextEvolveSettings) -> None:
        self.settings = settings
        self.stats = AgentStats()
        self._made: SharedGuidance | None = None
        """The newest guidance made by this process (committed children carry it into the pool)."""
        self._lock = asyncio.Lock()
        self.failures = FailureLog()
        """Failed candidates (Strategy.item_ended feeds it)."""

    def item_ended(self, ended: EndedItem) -> None:
        self.failures.add(ended)

    def navigator_state(self) -> dict:
        """The newest guidance this process made, for the run state (contextevolve.AgentContext)."""
        made = self._made
        return {} if made is None else {"guidance_version": made.version, "guidance": made.text}

    def restore_navigator(self, state: Mapping[str, object]) -> None:
        text, version = state.get("guidance"), state.get("guidance_version")
        if isinstance(text, str) and text and isinstance(version, int) and not isinstance(version, bool):
            self._made = SharedGuidance(version, text)

    def transitions(self, buf: EvolveBuffer) -> list[Transition]:
        """The buffer's transitions and the failed candidates, by version then id."""
        return sorted([*buf.transitions(), *self.failures.transitions(buf)],
                      key=lambda t: (t.created_version, t.child_id))

    def shared_guidance(self, buf: EvolveBuffer, version: int) -> SharedGuidance | None:
        found = [g for g in (buf.guidance, self._made) if g is not None]
        if not found or self.settings.guidance_refresh <= 0:
            return None
        newest = max(found, key=lambda g: (g.version, g.text))
        return newest if version - newest.version < self.settings.guidance_refresh else None

    async def navigate(self, view: StageView, env: StrategyEnv) -> Mapping[str, str]:
        async with self._lock:  # one Navigator call serves the items queued behind it
            buf = buffer_of(env.archive)
            shared = None if view.refresh else self.shared_guidance(buf, view.pool_version)
            if shared is not None:
                self.stats.shared_guidance += 1
                return {"guidance": shared.text, "guidance_version": str(shared.version)}
            transitions = self.transitions(buf)
            if not transitions:
                return {}  # nothing to learn from yet: the plain context
            s = self.settings
            sample = sample_by_category(transitions, s.navigator_samples, s.weights, _item_rng(view, "navigate"))
            self.stats.calls["navigator"] += 1
            reply = await env.ask(navigator_messages(env.description, summary_of(view.parent), sample), "navigate")
            text = (reply or "").strip()[:GUIDANCE_CHARS]
            if not text:
                self.stats.fallbacks["navigator"] += 1
                return {}
            self._made = SharedGuidance(view.pool_version, text)
            return {"guidance": text, "guidance_version": str(view.pool_version)}

    async def revise_guidance(self, view: StageView, env: StrategyEnv) -> Mapping[str, str]:
        """Reflective repair of stale guidance: the changes since it was made (new artifacts and
        failed candidates) -> revised guidance, or {} (dropped) when the repair fails."""
        made = self._made
        if made is not None and made.version >= env.archive.version:  # already made or revised at this version
            self.stats.shared_guidance += 1
            return {"guidance": made.text, "guidance_version": str(made.version)}
        buf = buffer_of(env.archive)
        failed = [Change(t.child_id, f"{t.child_id} from {t.parent_id}: failed, not scored ({t.failure})")
                  for t in self.failures.transitions(buf) if t.created_version >= view.pool_version]
        self.stats.calls["navigator_revise"] += 1
        revised, now = await revise_note(view, env, key="guidance", what="guidance", stage="navigate_revise",
                                         extra=failed)
        if revised is None:
            self.stats.fallbacks["navigator_revise"] += 1
            return {}
        self._made = SharedGuidance(now, revised[:GUIDANCE_CHARS])
        return {"guidance": revised[:GUIDANCE_CHARS], "guidance_version": str(now)}

    async def sample(self, view: StageView, env: StrategyEnv) -> Mapping[str, str]:
        s = self.settings
        buf = buffer_of(env.archive)
        candidates = sampler_candidates(buf, view.parent.artifact_id, s.sampler_candidates)
        if not candidates or s.exemplars <= 0:
            return {}
        if len(candidates) <= s.exemplars:
            ids = [a.artifact_id for a in candidates]  # nothing to choose: no call
        else:
            self.stats.calls["sampler"] += 1
            reply = await env.ask(sampler_messages(view.parent, view.notes.get("guidance", ""), candidates,
                                                   s.exemplars, self.failures.transitions(buf)), "sample")
            ids, unknown = parse_exemplars(reply or "", {a.artifact_id for a in candidates}, s.exemplars)
            self.stats.unknown_ids += unknown
            if not ids:
                self.stats.fallbacks["sampler"] += 1
                ids = fallback_exemplars(candidates, self.transitions(buf), s.exemplars)
        # The pool version the choice was made from: a stale pick is made again (fresh_notes).
        code_chars = EXEMPLAR_CODE_CHARS if s.exemplars_as_code else 0
        return {"exemplars": exemplars_note(buf, ids, code_chars), "exemplars_version": str(view.pool_version)}

    async def summarize(self, view: StageView, env: StrategyEnv) -> Mapping[str, str]:
        if view.child is None:
            return {}
        parent_summary = summary_of(view.parent)
        diff = unified(view.parent.text, view.child)
        self.stats.calls["summarizer"] += 1
        reply = await env.ask(summarizer_messages(parent_summary, view.parent.val_mean, view.child_score, diff,
                                                  view.child), "summarize")
        text = (reply or "").strip()
        if not text:
            self.stats.fallbacks["summarizer"] += 1
            text = fallback_summary(parent_summary, diff)
        return {"summary": text[:SUMMARY_CHARS]}
