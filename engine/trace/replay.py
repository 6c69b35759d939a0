"""`evotui replay`: re-issue the saved propose prompt of a candidate N times and re-evaluate each
reply the way the run did (patch apply with the run's format, the task's evaluator in the
sandbox), reporting the (parse, evaluation, score) triple per reply, the exact-match rate and
better / similar / worse classes against the recorded child (paper §5.3).

Variants: exact (the saved messages byte for byte); no-history (the same request with the
history sections, other programs, the change that produced the parent and recent failed
attempts, removed from the user message); strict-diff (§5.3's lexical question asked strictly:
the saved messages, but a diff reply counts as parsed only when every SEARCH block / hunk matches
the parent byte for byte, as the run's whitespace-tolerant matching is off, and each reply's edit
is compared line by line with the recorded edit, so "different program, same score" shows as a low
edit overlap next to a recovered score; diff and udiff runs of program tasks only). Prompt tasks: a reply is read as the propose stage reads
it and the new prompt is scored on the validation examples by the run's task model
(engine/trace/replay_prompt.py), comparable with the recorded val_mean.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from pathlib import Path
from typing import Any

from engine.code.patches import apply_reply, unified_diff
from engine.llm.errors import LLMError
from engine.sandbox import Sandbox
from engine.trace import collect
from engine.trace.errors import TraceError
from engine.trace.llm import Choice, endpoint_config, make_client, secret_vars

# Scores within this share of the recorded child's (|score| scaled) count as similar.
SIMILAR = 0.01
VARIANTS = ("exact", "no-history", "strict-diff")
HISTORY_SECTIONS = ("## Other programs", "## Change that produced", "## Recent failed attempts")
_SECTION = re.compile(r"(?m)^## ")


def strip_history(text: str) -> str:
    parts = _SECTION.split(text)
    kept = [parts[0]] + [p for p in parts[1:] if not ("## " + p).startswith(HISTORY_SECTIONS)]
    return kept[0] + "".join("## " + p for p in kept[1:])


def prompt_of(trace, cand: dict[str, Any], variant: str) -> list[dict[str, Any]]:
    item_id = (cand.get("item") or {}).get("item_id") or (cand["candidate_id"] if cand["kind"] == "attempt" else None)
    calls = [c for c in trace.contexts if c["item_id"] == item_id and c["stage"] == "propose" and c["messages"]]
    if not item_id or not calls:
        raise TraceError(f"{cand['candidate_id']} has no saved propose prompt (a seed or merge, or a run "
                         "recorded without LLM texts)")
    messages = [dict(m) for m in calls[0]["messages"]]  # the first request; later ones are patch retries
    if variant == "no-history":
        messages = [m | {"content": strip_history(m["content"])} if m["role"] == "user" and isinstance(m["content"], str)
                    else m for m in messages]
    return messages


def changed_lines(parent: str, child: str) -> set[str]:
    """The edit as a set of '+line' / '-line' strings (unified diff, headers and context dropped)."""
    diff = unified_diff(parent, child, context=0).splitlines()
    return {ln for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---"))}


def edit_overlap(parent: str, child: str, recorded: str) -> float:
    """Jaccard overlap of the replay's edit of the parent with the recorded one (1.0: same edit)."""
    a, b = changed_lines(parent, child), changed_lines(parent, recorded)
    return len(a & b) / len(a | b) if a | b else 1.0


def classify(score: float | None, recorded: float | None) -> str | None:
    if score is None or recorded is None:
        return None
    tol = SIMILAR * max(abs(recorded), 1e-12)
    return "better" if score > recorded + tol else "worse" if score < recorded - tol else "similar"


async def replay(store, run_id: str, candidate_id: str, n: int, *, variant: str, choice: Choice) -> dict[str, Any]:
    if n < 1:
        raise TraceError("-n must be at least 1")
    if variant not in VARIANTS:
        raise TraceError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    trace = await collect.collect(store, run_id)
    cand = trace.by_id().get(candidate_id)
    if cand is None:
        raise TraceError(f"no candidate {candidate_id!r} in run {run_id}; see `evotui export` or `evotui show`")
    env = trace.replay_environments[0] if trace.replay_environments else {}
    parent = trace.by_id().get(cand["parent_ids"][0]) if cand["parent_ids"] else None
    if parent is None or parent["source"] is None:
        raise TraceError(f"{candidate_id} is a seed; it has no prompt to replay")
    messages = prompt_of(trace, cand, variant)
    task = _load_task(env)
    run_config = trace.run.get("config") or {}
    cfg = endpoint_config(run_config, "reflection_llm", choice)
    from engine.tasks.sim_behaviours import all_behaviours

    client = make_client(cfg, run_config, "replay", behaviours=tuple(all_behaviours()))
    strict = variant == "strict-diff"
    if strict and task.kind != "program":
        raise TraceError("--variant strict-diff replays a program task's diff replies; this run is a prompt task "
                         "(use exact or no-history)")
    if task.kind == "program":
        fmt = (cand.get("meta") or {}).get("patch_format") or task.settings.patch_format
        if strict and fmt not in ("diff", "udiff"):
            raise TraceError(f"--variant strict-diff needs a diff or udiff run; {candidate_id} was made with patch "
                             f"format {fmt!r} (use exact)")
        sandbox = Sandbox(task.settings.limits(), concurrency=task.settings.eval_concurrency,
                          secret_vars=secret_vars(run_config))
        s = task.settings

        async def child_score(text: str) -> tuple[str | None, str, float | None, str]:
            patch = apply_reply(parent["source"], text, fmt, task.language)
            if not patch.ok:
                return None, patch.errors[0], None, ""
            if strict and patch.tolerant:
                return None, (f"strict-diff: {patch.tolerant} block(s) match the parent only ignoring "
                              "whitespace"), None, ""
            ev = await sandbox.evaluate(task.evaluator, patch.text, mode=task.sandbox_mode, cascade=s.cascade,
                                        thresholds=s.cascade_thresholds, program_name=task.program_name)
            return patch.text, "", (ev.score if ev.ok else None), ("" if ev.ok else ev.reason)
        task_client = None
    else:
        from engine.trace import replay_prompt

        task_client = replay_prompt.task_client(run_config, choice.sim)
        scorer = replay_prompt.ValScorer(task, task_client)

        async def child_score(text: str) -> tuple[str | None, str, float | None, str]:
            child, why = replay_prompt.child_of(text, parent, cand)
            if child is None:
                return None, why, None, ""
            score, err = await scorer.score(child)
            return child, "", score, err

    async def one(i: int) -> dict[str, Any]:
        try:
            res = await client.chat(messages, stage="propose")
        except LLMError as exc:
            if exc.fatal:
                raise TraceError(f"replay endpoint unusable: {exc}") from None
            return {"reply": i, "parsed": False, "evaluated": False, "score": None, "error": str(exc)}
        child, parse_error, score, eval_error = await child_score(res.text)
        if child is None:
            return {"reply": i, "parsed": False, "evaluated": False, "score": None, "error": parse_error}
        row = {"reply": i, "parsed": True, "evaluated": score is not None, "score": score,
               "exact": child == cand["source"], "class": classify(score, cand["val_mean"]),
               "error": eval_error or None}
        if strict and cand["source"] is not None:
            row["edit_overlap"] = round(edit_overlap(parent["source"], child, cand["source"]), 4)
        return row

    try:
        rows = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.aclose()
        if task_client is not None:
            await task_client.aclose()
    return _summary(run_id, cand, parent, variant, cfg.model, rows) | {"task_kind": task.kind}


def _load_task(env: dict[str, Any]):
    from engine.config import ConfigError
    from engine.tasks.loader import load_any_task
    from engine.tasks.prompt_task import TaskError

    path = env.get("task_path")
    if not path or not Path(path).is_dir():
        raise TraceError(f"the task folder {path!r} of the replay environment is not on this machine")
    try:
        return load_any_task(path)
    except (TaskError, ConfigError) as exc:
        raise TraceError(f"cannot load the task at {path}: {exc}") from None


def _summary(run_id, cand, parent, variant, model, rows) -> dict[str, Any]:
    n = len(rows)
    classes = {k: sum(r.get("class") == k for r in rows) for k in ("better", "similar", "worse")}
    scores = [r["score"] for r in rows if r["score"] is not None]
    overlaps = [r["edit_overlap"] for r in rows if "edit_overlap" in r]
    return {"run_id": run_id, "candidate_id": cand["candidate_id"], "parent_id": parent["candidate_id"],
            "variant": variant, "model": model, "n": n, "recorded_score": cand["val_mean"],
            "parent_score": parent["val_mean"],
            "parse_rate": sum(r["parsed"] for r in rows) / n, "eval_rate": sum(r["evaluated"] for r in rows) / n,
            "exact_match_rate": sum(bool(r.get("exact")) for r in rows) / n,
            "mean_score": sum(scores) / len(scores) if scores else None,
            # §5.3's Replay/Orig. column: the median replayed score over the recorded one.
            "replay_to_original": (statistics.median(scores) / cand["val_mean"]
                                   if scores and cand["val_mean"] else None),
            **({"mean_edit_overlap": sum(overlaps) / len(overlaps) if overlaps else None} if variant == "strict-diff"
               else {}),
            "classes": classes, "replies": rows}
