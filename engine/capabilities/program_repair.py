"""LLM reflective repair of stale program proposals (issue 32; FlashEvolve §3.2 for programs).

Under the reflective policy a proposal whose parent is older than the pool is checked before its
evaluation, the expensive part of a program step. Two cheap rules come first and spend no call:
a proposal whose parent was removed, or whose program was committed since, is discarded. Every
other stale proposal goes to the LLM, which sees

- the current best program (what a patch applies to),
- the proposal's own change (its diff against its parent),
- what a mechanical three-way merge onto the best would do (as the program chain rebases),
- the diffs of the programs committed since the proposal's version, newest first, as many as
  fit a token budget (the rest counted, not shown),

and answers keep (evaluate it as it is, against its parent), patch (its useful part as a new
patch against the current best, in the task's patch format; EVOLVE-BLOCK regions are enforced as
for any proposal and the patched program passes the proposal filters) or discard, with a reason.
The verdict becomes a staleness decision row (stage reflect, with the shown/omitted counts), the
item's note `stale_repair` (the committed child's meta notes) and its typed `repair` (RepairDecision, stored and exported as `repair`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from engine.capabilities.reflective_repair import RepairHost
from engine.code.filters import ProgramFilters, program_hash
from engine.code.patches import apply_reply, unified_diff
from engine.context import stop_if_fatal
from engine.items import RepairDecision, WorkItem
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.llm.wire import estimate_tokens
from engine.pool import Artifact
from engine.selection import merge
from engine.stages.program_prompt import clip

MARKER = "evotui-program-repair:"
"""In the system message: the simulator (engine/llm/sim/program_repair_answers.py) knows the layout by it."""
SYSTEM = (
    f"{MARKER} You maintain a pool of programs improved by many proposals at once. A proposal was "
    "written against an older pool; other programs were committed since. Decide whether its change "
    "still helps the current best program. Answer `VERDICT: keep` if it should be evaluated as it "
    "is (its parent is still a good base), `VERDICT: patch` if its useful part should be applied to "
    "the current best program (then give that patch), or `VERDICT: discard` if it is redundant, "
    "conflicts with the newer changes or no longer helps. Then `REASON:` in one line. Only code "
    "between '{start}' and '{end}' may change."
)
PATCH_FORMAT = {
    "diff": "SEARCH/REPLACE blocks against the current best program (evotui-repair-format: diff):\n"
            "<<<<<<< SEARCH\n<lines copied exactly from the current best program>\n=======\n<new lines>\n"
            ">>>>>>> REPLACE",
    "udiff": "a unified diff of the current best program in a ```diff block (evotui-repair-format: udiff)",
    "full": "the complete patched program in one ```{fence} block (evotui-repair-format: full)",
}
SHARES = {"best": 0.45, "proposal": 0.15, "changes": 0.4}
"""How the request's token budget is split between its sections."""
_VERDICT = re.compile(r"VERDICT:\s*\**\s*(keep|patch|discard)\b", re.I)
_REASON = re.compile(r"REASON:\s*(.+)", re.I)


class ProgramRepairHost(RepairHost, Protocol):
    """The program kind's stages: the run context and recorder, plus the proposal filters and the task."""

    filters: ProgramFilters
    task: object
    settings: object


@dataclass(frozen=True)
class Shown:
    """What one repair request shows: its messages and the commits shown and left out."""

    messages: list[dict]
    shown: int
    omitted: int
    mechanical: str


def token_budget(max_prompt_chars: int) -> int:
    """The repair request's budget in tokens: the proposer's prompt bound, counted as tokens."""
    return estimate_tokens(max_prompt_chars)


def _mechanical(parent: str, child: str, best: Artifact, parent_id: str) -> str:
    if best.artifact_id == parent_id:
        return "the current best is the proposal's parent: the proposal applies as it is"
    merged = merge.three_way(parent, child, best.text)
    if merged is None:
        return ("a three-way line merge onto the current best fails (a conflict with a newer change, "
                "or the best already holds the edit)")
    return "a three-way line merge onto the current best applies cleanly"


def build_request(best: Artifact, parent: Artifact, item: WorkItem, pool_version: int,
                  changes: list[tuple[int, Artifact, float | None]], *, fmt: str, language, budget_tokens: int,
                  description: str = "") -> Shown:
    """changes: (version, committed artifact, its parent's score) since the item's version, oldest first."""
    chars = {k: int(v * budget_tokens * 4) for k, v in SHARES.items()}
    fence = language.fence
    child = item.proposal.child
    diff = item.proposal.diff or unified_diff(parent.text, child, parent.artifact_id, "proposal")
    mechanical = _mechanical(parent.text, child, best, parent.artifact_id)
    parts = [f"## Task\n{clip(description.strip(), 1000)}\n"] if description else []
    parts.append(f"## Current best program ({best.artifact_id}, combined_score {best.val_mean:.6g}; pool version "
                 f"{pool_version})\n```{fence}\n{clip(best.text.rstrip(), chars['best'])}\n```\n")
    parts.append(f"## Stale proposal (made at pool version {item.created_version} from {parent.artifact_id}, "
                 f"combined_score {parent.val_mean:.6g})\nIts change to its parent:\n"
                 f"```diff\n{clip(diff.rstrip(), chars['proposal'])}\n```\n")
    parts.append(f"## Mechanical rebase\n{mechanical}\n")
    left, blocks = chars["changes"], []
    for version, art, parent_score in reversed(changes):  # newest first: the most relevant to the best
        base = art.parent_ids[0] if art.parent_ids else ""
        change = str(art.meta.get("diff") or "(no diff stored)")
        delta = f", delta {art.val_mean - parent_score:+.4g}" if parent_score is not None else ""
        block = (f"### v{version}: {art.artifact_id} from {base or 'nothing'} (combined_score "
                 f"{art.val_mean:.6g}{delta})\n```diff\n{change.rstrip()}\n```\n")
        if len(block) > left:
            break
        blocks.append(block)
        left -= len(block)
    omitted = len(changes) - len(blocks)
    parts.append(f"## Programs committed since version {item.created_version} ({len(changes)}, newest first)")
    parts.extend(blocks)
    if omitted:
        parts.append(f"[... {omitted} older commit(s) not shown: over the request's token budget ...]\n")
    ask = PATCH_FORMAT[fmt].replace("{fence}", fence)
    parts.append(f"Answer with VERDICT and REASON lines; for patch, then {ask}")
    system = SYSTEM.format(start=language.marker("START"), end=language.marker("END"))
    return Shown([{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}],
                 len(blocks), omitted, mechanical)


def parse_verdict(reply: str) -> tuple[str, str, str]:
    """(verdict, reason, the text after the verdict line); ('malformed', why, '') without a verdict."""
    m = _VERDICT.search(reply or "")
    if not m:
        return "malformed", "no VERDICT line", ""
    reason = _REASON.search(reply)
    tail = reply[m.end():]
    if reason and reason.start() >= m.end():
        tail = reply[reason.end():]
    return m.group(1).lower(), reason.group(1).strip() if reason else "", tail


class ProgramRepair:
    """The reflect stage of program tasks under the reflective policy."""

    def __init__(self, host: ProgramRepairHost) -> None:
        self.host = host

    def _rule(self, item: WorkItem, changes: list) -> str:
        """Why the proposal is discarded without a call ("" when the LLM should look)."""
        pool = self.host.ctx.pool
        if item.parent_id in pool and pool.get(item.parent_id).status == "removed":
            return f"parent {item.parent_id} was removed from the pool"
        digest = program_hash(item.proposal.child)
        if any(program_hash(art.text) == digest for _, art, _ in changes):
            return "an identical program was committed since"
        return ""

    async def reflect(self, item: WorkItem) -> WorkItem | None:
        host = self.host
        ctx = host.ctx
        pool = ctx.pool
        gap = pool.gap(item.created_version)
        changes = []
        for ch in pool.changes_since(item.created_version):
            if ch.artifact_id not in pool:
                continue
            art = pool.get(ch.artifact_id)
            if art.status == "removed" or ch.artifact_id == item.parent_id:
                continue
            base = pool.get(art.parent_ids[0]) if art.parent_ids and art.parent_ids[0] in pool else None
            changes.append((ch.version, art, base.val_mean if base is not None else None))
        seen: set[str] = set()
        changes = [c for c in changes if not (c[1].artifact_id in seen or seen.add(c[1].artifact_id))]
        rule = self._rule(item, changes)
        if rule:
            return self._decide(item, gap, "discard", rule, {"changes": len(changes), "llm": False})
        best = pool.leader() or pool.best()
        parent = pool.get(item.parent_id)
        settings = host.settings
        shown = build_request(best, parent, item, pool.version, changes, fmt=settings.patch_format,
                              language=host.task.language, budget_tokens=token_budget(settings.max_prompt_chars),
                              description=host.task.description)
        tokens_before = item.tokens
        patched = None
        try:
            res = await ctx.reflection_llm.chat(shown.messages, stage="reflect", shrink=middle_out)
            if res.finish_reason == "length":
                verdict, reason = "malformed", "reflection cut by max_tokens"
            else:
                verdict, reason, tail = parse_verdict(res.text)
                if verdict == "patch":
                    verdict, reason, patched = self._patch(best, tail, reason)
        except LLMError as exc:
            stop_if_fatal(exc)
            verdict, reason = "malformed", f"LLM error: {exc.kind}"
        detail = {"best": best.artifact_id, "changes": len(changes), "shown": shown.shown,
                  "omitted": shown.omitted, "mechanical": shown.mechanical, "llm": True}
        kept = self._decide(item, gap, verdict, reason or verdict, detail, tokens=item.tokens - tokens_before)
        if kept is not None and verdict == "patch":
            # rebase_checked: _patch ran the filters, evaluate must not count it a duplicate of itself
            item.amend_proposal(rebased={"from_parent": item.parent_id, "from_version": item.created_version,
                                         "to_version": pool.version, "mechanical": False},
                                child=patched, diff=unified_diff(best.text, patched, best.artifact_id, "child"),
                                rebase_checked=True)
            item.parent_id = best.artifact_id
        return kept

    def _patch(self, best: Artifact, tail: str, reason: str) -> tuple[str, str, str | None]:
        """The LLM's patch applied to the current best and put through the proposal filters."""
        host = self.host
        res = apply_reply(best.text, tail, host.settings.patch_format, host.task.language)
        host.filters.counts["region"] += res.region_violations
        if not res.ok:
            return "malformed", f"patch does not apply to the current best: {clip(res.errors[0], 300)}", None
        if res.text.strip() == best.text.strip():
            return "discard", "patch adds nothing to the current best", None
        verdict = host.filters.check(best.text, res.text)
        if not verdict.passed:
            return "discard", f"patched program fails filter {verdict.kind}: {verdict.reason}", None
        host.filters.remember(res.text)
        return "patch", reason, res.text

    def _decide(self, item: WorkItem, gap: int, verdict: str, reason: str, detail: dict,
                tokens: int = 0) -> WorkItem | None:
        ctx, recorder = self.host.ctx, self.host.recorder
        ctx.staleness_counts[f"reflect_{verdict}"] += 1
        item.repair = RepairDecision(verdict, reason, ctx.pool.version, dict(detail))
        item.notes = {**(item.notes or {}),
                      "stale_repair": f"{verdict} at pool v{ctx.pool.version} (gap {gap}): {reason}"}
        if recorder is not None:
            recorder.record_decision(item, "reflect", gap, verdict, reason, tokens=tokens, detail=detail)
        if verdict in ("discard", "malformed"):
            if recorder is not None:
                recorder.discard(item, "reflect", gap, f"reflection: {verdict}: {reason}", "discarded_reflect")
            else:
                item.end("discarded_reflect", reason)
            return None
        item.reflected_at = ctx.pool.version
        return item
