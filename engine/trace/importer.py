"""`evotui import`: an EvoTrace folder (ours or another tool's in the same schema) becomes a new,
read-only run with status `imported` in a database. Every file is read and checked before anything
is written, and every problem names its file and line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from engine.llm.records import CallRecord
from engine.store.store import Store
from engine.trace.collect import IMPORTED_KEY, MIGRATION_KEYS
from engine.trace.errors import TraceError
from engine.trace.model import FORMAT, OBJECT_TYPES, SCHEMA_VERSION, Trace
from engine.trace.textref import BlobReader

IMPORTED_STATUS = "imported"
_SCHEMAS = Path(__file__).with_name("schemas")


def required_fields(kind: str) -> list[str]:
    return list(json.loads((_SCHEMAS / f"{kind}.json").read_text(encoding="utf-8"))["required"])


def _read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    if not path.is_file():
        raise TraceError(f"{path}: missing (not an EvoTrace export folder?)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise TraceError(f"{path}: format is not {FORMAT!r}")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise TraceError(f"{path}: schema_version {manifest.get('schema_version')!r}; this evotui reads "
                         f"{SCHEMA_VERSION}")
    return manifest


def _read_jsonl(path: Path, kind: str) -> list[tuple[str, dict[str, Any]]]:
    if not path.is_file():
        raise TraceError(f"{path}: missing")
    need = required_fields(kind)
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            where = f"{path}:{n}"
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{where}: not a JSON object")
            missing = [k for k in need if k not in row]
            if missing:
                raise TraceError(f"{where}: missing field(s) {', '.join(missing)}")
            rows.append((where, row))
    return rows


def read_trace(folder: Path) -> Trace:
    """The folder's trace with texts in full; raises TraceError naming the file and line."""
    if not folder.is_dir():
        raise TraceError(f"{folder}: no such folder")
    _read_manifest(folder)
    blobs = BlobReader(folder / "blobs")
    data = {kind: _read_jsonl(folder / f"{kind}.jsonl", kind) for kind in OBJECT_TYPES}
    if len(data["runs"]) != 1:
        raise TraceError(f"{folder / 'runs.jsonl'}: holds {len(data['runs'])} runs; one is expected")
    run = data["runs"][0][1]
    _check_migrations(folder, run)
    candidates = []
    for where, row in data["candidates"]:
        candidates.append({**row, "source": blobs.text(row["source"], where)})
    contexts = []
    for where, row in data["contexts"]:
        messages = row["messages"]
        if messages is not None:
            messages = [{**m, "content": blobs.text(m.get("content"), where)
                         if not isinstance(m.get("content"), list) else m["content"]} for m in messages]
        contexts.append({**row, "messages": messages, "response": blobs.text(row["response"], where)})
    _check_references(folder, data, {c["candidate_id"] for c in candidates})
    return Trace(run=run, candidates=candidates, evaluations=[r for _, r in data["evaluations"]],
                 edges=[r for _, r in data["edges"]], contexts=contexts,
                 replay_environments=[r for _, r in data["replay_environments"]])


def _check_migrations(folder: Path, run: dict[str, Any]) -> None:
    """The run's island_migrations (collect.MIGRATION_KEYS each), when it has any."""
    found = run.get("island_migrations")
    if found is None:
        return
    where = folder / "runs.jsonl"
    if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
        raise TraceError(f"{where}: island_migrations must be a list of objects (one per migration)")
    for n, m in enumerate(found):
        missing = [k for k in MIGRATION_KEYS if k not in m]
        if missing:
            raise TraceError(f"{where}: island_migrations[{n}] lacks {', '.join(missing)}")
        if not isinstance(m["artifact_ids"], list):
            raise TraceError(f"{where}: island_migrations[{n}].artifact_ids must be a list of candidate ids")


def _check_references(folder: Path, data: dict[str, list[tuple[str, dict[str, Any]]]], ids: set[str]) -> None:
    for where, row in data["edges"]:
        for key in ("parent_id", "child_id"):
            if row[key] not in ids:
                raise TraceError(f"{where}: {key} {row[key]!r} is not in candidates.jsonl")
    for where, row in data["evaluations"]:
        if row["candidate_id"] not in ids:
            raise TraceError(f"{where}: candidate_id {row['candidate_id']!r} is not in candidates.jsonl")



async def _new_run_id(store: Store, original: str) -> str:
    base = f"{original}-imported"
    run_id, n = base, 1
    while await store.load_run(run_id) is not None:
        n += 1
        run_id = f"{base}-{n}"
    return run_id


async def write_trace(store: Store, trace: Trace, source: Path) -> str:
    """Insert the trace as a new run; returns its id."""
    run = trace.run
    run_id = await _new_run_id(store, str(run["run_id"]))
    store.insert_run(run_id, task=run["task"], task_path=run.get("task_path"), config_json=run.get("config") or {},
                     seed=run.get("seed"), mode=run.get("mode"), policy=run.get("policy"),
                     backend=run.get("backend"), status=IMPORTED_STATUS, created_at=float(run["created_at"]))
    store.keep_llm_text(run_id, True)  # the texts are the point of an import
    summary = dict(run.get("summary") or {})
    summary[IMPORTED_KEY] = {"from": {"run_id": run["run_id"], "folder": str(source.resolve()),
                                      "imported_at": time.time(), "status": run["status"]},
                             "replay_environments": trace.replay_environments}
    store.update_run(run_id, updated_at=float(run.get("updated_at") or run["created_at"]),
                     pool_version=int(run.get("pool_version") or 0), counters_json=run.get("counters"),
                     summary_json=summary, rng_state_json=run.get("rng_state"))
    for m in run.get("island_migrations") or ():
        store.insert_migration(run_id, {k: m[k] for k in MIGRATION_KEYS})
    for c in trace.candidates:
        if c["kind"] == "artifact":
            store.upsert_artifact(run_id, artifact_id=c["candidate_id"], text=c["source"] or "",
                                  status=c["status"], parent_ids=c["parent_ids"], created_version=c["iteration"],
                                  val_mean=c["val_mean"], val_scores=c.get("val_scores"),
                                  minibatch=c.get("minibatch"), created_at=c["created_at"], meta=c.get("meta"),
                                  components=c.get("components"))
        item = c.get("item")
        if item:
            payload = dict(item["payload"])
            if payload.get("child") == {"same_as": "source"}:
                payload["child"] = c["source"]
            store.upsert_item(run_id, item_id=item["item_id"], created_version=item.get("created_version", c["iteration"]),
                              parent_artifact_id=item.get("parent_artifact_id"), stage=item.get("stage"),
                              payload=payload, outcome=item.get("outcome"), error=item.get("error"),
                              created_at=item.get("created_at", c["created_at"]),
                              updated_at=item.get("updated_at", c["created_at"]))
    # An attempt's edges are rebuilt from its item row on export (collect.attempt_edges); the
    # lineage table keeps pool members only, as in a native run.
    rebuilt = {c["candidate_id"] for c in trace.candidates if c["kind"] == "attempt" and c.get("item")}
    for e in trace.edges:
        if e["child_id"] in rebuilt:
            continue
        store.insert_lineage(run_id, e["parent_id"], e["child_id"], e["operator"], e.get("created_at", 0.0))
    for ev in trace.evaluations:
        store.insert_evaluations(run_id, ev["candidate_id"], [(ev["example_id"], ev["split"], ev["score"],
                                                               ev.get("feedback"), ev.get("stage"))],
                                 ev.get("created_at", 0.0))
    for ctx in trace.contexts:
        store.insert_llm_call(run_id, CallRecord(
            endpoint=ctx["endpoint"], url=ctx.get("url") or "", model=ctx.get("model") or "",
            stage=ctx.get("stage") or "default", status=ctx["status"], finish_reason=ctx.get("finish_reason"),
            prompt_tokens=int(ctx.get("prompt_tokens") or 0), completion_tokens=int(ctx.get("completion_tokens") or 0),
            latency_s=ctx.get("latency_s"), retries=int(ctx.get("retries") or 0), error=ctx.get("error"),
            started_at=float(ctx["created_at"]), ttft_s=ctx.get("ttft_s"), messages=ctx["messages"],
            response=ctx["response"]), item_id=ctx.get("item_id"))
    await store.flush()
    return run_id
