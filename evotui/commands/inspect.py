"""`evotui runs` and `evotui show`: read-only views of a database."""

from __future__ import annotations

import argparse
import json
import sys
import time

from engine.costs.spend import spend_text, stored_spend
from engine.store.store import Store, StoreError


def _fmt_score(v) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else "-"


async def main(args: argparse.Namespace) -> int:
    if not args.db.exists():
        print(f"evotui: error: no database at {args.db}; pass --db PATH (runs are stored where `run --db` put them)", file=sys.stderr)
        return 2
    try:
        store = await Store.open(args.db, create=False, readonly=True)
    except StoreError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "runs":
            return await _runs(store, args)
        return await _show(store, args)
    finally:
        await store.close()


async def _runs(store: Store, args: argparse.Namespace) -> int:
    rows = await store.list_runs()
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    if not rows:
        print(f"no runs in {args.db}")
        return 0
    # Text columns as wide as their longest value, so a long task name does not shift the rest.
    w = {k: max(len(head), *(len(str(r[k])) for r in rows))
         for k, head in (("run_id", "run"), ("task", "task"), ("status", "status"), ("mode", "mode"), ("policy", "policy"))}
    print(f"{'run':{w['run_id']}} {'task':{w['task']}} {'status':{w['status']}} {'mode':{w['mode']}} "
          f"{'policy':{w['policy']}} {'ver':>4} {'seed':>6} {'best':>6}  created")
    for r in rows:
        summary = r.get("summary") or {}
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"])) if r.get("created_at") else "-"
        print(
            f"{r['run_id']:{w['run_id']}} {r['task']:{w['task']}} {r['status']:{w['status']}} {r['mode']:{w['mode']}} "
            f"{r['policy']:{w['policy']}} {r.get('pool_version') or 0:>4} "
            f"{_fmt_score(summary.get('seed_score')):>6} {_fmt_score(summary.get('best_score')):>6}  {created}"
        )
    return 0


def _islands(record) -> tuple[list[dict], list[dict], list[dict]] | None:
    """The islands of a run whose strategy declares an island archive, rebuilt from the stored
    artifacts by the same fold the run used (engine/selection/islands.py), on the grid axes its
    task declares (task.toml [[descriptor]], read again as a resume does), so they equal the live
    run's: (islands, the fold's migrations, the grid's axes); None for other strategies."""
    from engine.strategy.islands_view import island_options

    table = dict(record.config.get("strategy") or {})
    table["name"] = (record.summary or {}).get("strategy") or table.get("name")  # None in config: the kind's default
    options = island_options(table)
    if options is None:
        return None
    from engine.run.state import artifact_from_row
    from engine.run.stored_descriptors import stored_descriptors
    from engine.selection.islands import IslandArchive, IslandSettings
    from engine.strategy.boltzmann import island_tau
    from engine.strategy.islands_view import grid_axes
    from engine.strategy.loongflow import LoongFlowOptions

    opts = LoongFlowOptions(**options)
    descriptors, warning = stored_descriptors(record.task_path)
    if warning:
        print(f"evotui: warning: {warning}", file=sys.stderr)
    settings = IslandSettings(opts.islands, opts.migration_interval, opts.migration_share, opts.bins,
                              opts.population_cap, opts.migration_threshold, opts.migration_trigger, descriptors)
    archive = IslandArchive(settings, [artifact_from_row(a) for a in record.artifacts])
    out = []
    for i in range(len(archive)):
        members = archive.members(i)
        grid = archive.grid(i)
        scores = {a.artifact_id: a.val_mean for a in members}
        out.append({
            "island": i,
            "best_id": members[0].artifact_id if members else None,
            "best_score": members[0].val_mean if members else None,
            "size": len(members),
            "cells": [{"cell": list(cell), "id": aid, "score": scores.get(aid)}
                      for cell, aid in sorted(grid.elites.items())],
            "temperature": round(island_tau(archive, i, opts.temperature_rule, opts.tau_base), 4),
            "diversity": round(archive.diversity(i), 4),
        })
    per_instance = all(archive.traits(a.artifact_id).coverage is not None
                       for i in range(len(archive)) for a in archive.members(i))
    axes = [{"name": a.name, "binned": a.detail, "bins": a.bins, "declared": descriptors is not None}
            for a in grid_axes(descriptors, "coverage" if per_instance else "novelty")]
    return out, [{"at": m.at, "version": m.version, "from": m.source, "to": m.target,
                  "from_diversity": m.source_diversity, "to_diversity": m.target_diversity,
                  "migrants": list(m.artifact_ids)} for m in archive.migration_log()], axes


def _migration_lines(rows: list[dict], rebuilt: list[dict], shown: int = 6) -> list[str]:
    """`show`'s migrations: the recorded rows (schema v9), count and the newest few; a run that
    predates the rows gets the fold's migrations rebuilt from its artifacts, marked as such."""
    def one(v, src, dst, d_src, d_dst, trigger, ids) -> str:
        why = f" (D {d_src:.2f} vs {d_dst:.2f})" if trigger == "diversity" else " (interval)"
        return f"v{v} {src}->{dst}{why}: {', '.join(ids) or 'none new'}"

    if rows:
        r0 = rows[-1]
        trigger = (f"diversity differs > {r0['threshold']:g}" if r0["trigger"] == "diversity" else "interval")
        head = f"{len(rows)} recorded (trigger: {trigger}, checked every {r0['interval']} commits)"
        last = [one(r["pool_version"], r["from_island"], r["to_island"], r["from_diversity"], r["to_diversity"],
                    r["trigger"], r["artifact_ids"]) for r in rows[-shown:]]
    elif rebuilt:
        head = f"none recorded (the run predates migration rows); {len(rebuilt)} rebuilt from its artifacts"
        last = [one(m["version"], m["from"], m["to"], m["from_diversity"], m["to_diversity"], "diversity",
                    m["migrants"]) for m in rebuilt[-shown:]]
    else:
        return ["none yet"]
    return [head, *(f"  {line}" for line in reversed(last))]


def _pes_counts(arts: list[dict]) -> dict[str, int]:
    """Plans and summaries the committed artifacts keep, and the planner/summarizer fallbacks."""
    notes = [(a.get("meta") or {}).get("notes") or {} for a in arts]
    names = {"plan": "plans", "plan_fallback": "plan_fallbacks", "summary": "summaries",
             "summary_fallback": "summary_fallbacks"}
    return {name: sum(1 for n in notes if key in n) for key, name in names.items()}


def _active_best(record) -> dict | None:
    """The run's active best as the engine sees it (restores followed: the pool rebuilt from
    its rows, as on resume); the top score when the changelog cannot be replayed."""
    from engine.pool import Pool, PoolError
    from engine.run.state import artifact_from_row, change_from_row

    arts = record.artifacts
    if not arts:
        return None
    pool = Pool()
    try:
        pool.restore([artifact_from_row(a) for a in arts], [change_from_row(e) for e in record.pool_events])
        best = pool.best()
    except (PoolError, KeyError) as exc:  # an imported or partial changelog: fall back, say why
        print(f"evotui: warning: pool history not replayable ({exc}); best = top score", file=sys.stderr)
        best = None
    if best is None:
        return max(arts, key=lambda a: a["val_mean"] or 0.0)
    return next(a for a in arts if a["artifact_id"] == best.artifact_id)


def _restores(record) -> list[dict]:
    """The audit of `evotui restore` and control-socket restores: one entry per restore row."""
    out = []
    for e in record.pool_events:
        if e.get("kind") != "restore":
            continue
        d = e.get("detail") or {}
        out.append({"version": e.get("version"), "artifact_id": e.get("artifact_id"), "at": e.get("created_at"),
                    "by": d.get("by", "engine"), "reason": d.get("reason") or "", "previous_best": d.get("previous_best")})
    return out


async def _show(store: Store, args: argparse.Namespace) -> int:
    run_id = args.run_id or await store.latest_run_id()
    record = await store.load_run(run_id) if run_id else None
    if record is None:
        print(f"evotui: error: no run {run_id!r} in {args.db}; see `evotui runs --db {args.db}`", file=sys.stderr)
        return 2
    arts = record.artifacts
    best = _active_best(record)
    seed = next((a for a in arts if a["status"] == "seed"), None)
    info = {
        "run_id": record.run_id,
        "task": record.task,
        "status": record.status,
        "mode": record.mode,
        "policy": record.policy,
        "backend": record.backend,
        "pool_version": record.pool_version,
        "artifacts": len(arts),
        "seed_score": seed["val_mean"] if seed else None,
        "best_score": best["val_mean"] if best else None,
        "best_id": best["artifact_id"] if best else None,
        "open_items": len(record.open_items),
        "counts": record.counts,
        "llm_texts": await store.text_stats(record.run_id),
        "summary": record.summary,
        "spend": stored_spend(record.config or {}, record.counts or {}),
    }
    info["restores"] = _restores(record)
    if seed is not None and (seed.get("meta") or {}).get("branched_from"):
        info["branched_from"] = seed["meta"]["branched_from"]
    islands, rebuilt, axes = _islands(record) or (None, [], [])
    if islands is not None:
        info["islands"] = islands
        info["grid_axes"] = axes
        info["migrations"] = await store.fetch_rows("migrations", record.run_id)
        info["migrations_rebuilt"] = rebuilt
        info["pes"] = _pes_counts(arts)
    if args.json:
        print(json.dumps(info, default=str))
        return 0
    for key in ("run_id", "task", "status", "mode", "policy", "backend", "pool_version", "artifacts", "open_items"):
        print(f"{key:14} {info[key]}")
    print(f"{'seed score':14} {_fmt_score(info['seed_score'])}")
    print(f"{'best score':14} {_fmt_score(info['best_score'])} ({info['best_id']})")
    print(f"{'counts':14} {json.dumps(record.counts, default=str)}")
    spend = stored_spend(record.config or {}, record.counts or {})
    if spend is not None:
        print(f"{'spend':14} {spend_text(spend)}")
    slots = (((record.summary or {}).get("evaluator") or {}).get("gpu_slots") or {})
    if "slots" in slots:
        print(f"{'gpu slots':14} {slots['slots']} on GPUs {', '.join(slots['gpus'])} ({slots['per_gpu']} per GPU), "
              f"{slots['leases']} evaluations leased one")
    t = info["llm_texts"]
    print(f"{'llm texts':14} {t['calls_with_text']} of {t['calls']} calls with texts, {t['blobs']} blobs, "
          f"{t['blob_bytes']} bytes stored ({t['raw_bytes']} raw)")
    if "branched_from" in info:
        link = info["branched_from"]
        print(f"{'branched from':14} run {link.get('run_id')} artifact {link.get('artifact_id')}")
    for r in info["restores"]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["at"])) if r.get("at") else "-"
        print(f"{'restore':14} v{r['version']} {when} by {r['by']}: {r['artifact_id']} (was {r['previous_best'] or '-'})"
              + (f": {r['reason']}" if r["reason"] else ""))
    if islands is not None:
        print(f"{'islands':14} " + "; ".join(
            f"{isl['island']}: best {_fmt_score(isl['best_score'])} ({isl['best_id']}), {isl['size']} members, "
            f"{len(isl['cells'])} cells, tau {isl['temperature']:.2f}" for isl in islands))
        print(f"{'grid axes':14} " + " x ".join(f"{a['name']} ({a['binned']}" + (f", {a['bins']} bins)" if a["bins"] else ")")
                                                for a in axes) + (" [task.toml [[descriptor]]]" if axes[0]["declared"] else ""))
        first, *rest = _migration_lines(info["migrations"], rebuilt)
        print(f"{'migrations':14} {first}")
        for line in rest:
            print(f"{'':14} {line}")
        p = info["pes"]
        print(f"{'pes':14} {p['plans']} plans ({p['plan_fallbacks']} fallbacks), "
              f"{p['summaries']} summaries ({p['summary_fallbacks']} fallbacks)")
    if best is not None:
        # A program task's summary names its sandbox; a prompt task's has none.
        what = "program" if "sandbox" in (info.get("summary") or {}) else "prompt"
        print(f"\nbest {what}:\n" + best["text"])
    return 0
