"""`evotui export`: a run as an EvoTrace folder, or a GEPA-shaped result JSON.

EvoTrace folder: manifest.json, one JSONL file per object type (model.OBJECT_TYPES), blobs/ with
the long texts by sha256 (textref.py). Written into a temporary folder next to the target and
renamed at the end, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.trace.errors import TraceError
from engine.trace.model import FORMAT, OBJECT_TYPES, SCHEMA_VERSION, Trace
from engine.trace.textref import BlobWriter


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False) + "\n"


def _message(msg: dict[str, Any], blobs: BlobWriter) -> dict[str, Any]:
    out = dict(msg)
    if isinstance(out.get("content"), str):
        out["content"] = blobs.ref(out["content"])
    return out


def encode(trace: Trace, kind: str, row: dict[str, Any], blobs: BlobWriter) -> dict[str, Any]:
    """A row of the trace with its long texts replaced by blob references."""
    out = dict(row)
    if kind == "candidates":
        out["source"] = blobs.ref(row["source"])
    elif kind == "contexts":
        out["messages"] = None if row["messages"] is None else [_message(m, blobs) for m in row["messages"]]
        out["response"] = blobs.ref(row["response"])
    return out


def check_target(target: Path) -> None:
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise TraceError(f"{target} exists and is not an empty folder; choose a new path")
    if not target.parent.is_dir():
        raise TraceError(f"{target.parent} is not a folder")


def _publish(tmp: Path, target: Path) -> None:
    if target.exists():
        target.rmdir()  # empty, checked before
    os.replace(tmp, target)


def write_evotrace(trace: Trace, target: Path) -> dict[str, Any]:
    """Write the folder; returns the manifest."""
    check_target(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        blobs = BlobWriter(tmp / "blobs")
        counts = {}
        for kind in OBJECT_TYPES:
            rows = trace.rows(kind)
            with open(tmp / f"{kind}.jsonl", "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(_line(encode(trace, kind, row, blobs)))
            counts[kind] = len(rows)
        manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run_id": trace.run_id,
                    "exported_at": time.time(), "producer": "evotui", "files": counts,
                    "blobs": len(blobs.written), "inline_max_bytes": 512}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        _publish(tmp, target)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def gepa_result(trace: Trace) -> dict[str, Any]:
    """GEPA's GEPAResult fields (gepa.core.result): candidates as {component: text}, parents as
    candidate indices, per-instance validation scores, best index. Only pool members count."""
    arts = trace.artifacts()
    index = {a["candidate_id"]: i for i, a in enumerate(arts)}
    candidates = [a["components"] if isinstance(a.get("components"), dict) else {"program": a["source"]}
                  for a in arts]
    scores = [float(a["val_mean"]) if a["val_mean"] is not None else float("-inf") for a in arts]
    subscores = [dict(a["val_scores"] or {}) for a in arts]
    instances = sorted({k for s in subscores for k in s})
    per_best = {k: sorted({i for i, s in enumerate(subscores)
                           if k in s and s[k] == max(t.get(k, float("-inf")) for t in subscores)})
                for k in instances}
    best = max(range(len(arts)), key=lambda i: scores[i]) if arts else None
    return {
        "candidates": candidates,
        "parents": [[index.get(p) for p in a["parent_ids"]] or None for a in arts],
        "val_aggregate_scores": [s if s != float("-inf") else None for s in scores],
        "val_subscores": subscores,
        "per_val_instance_best_candidates": per_best,
        "discovery_eval_counts": [a["iteration"] for a in arts],
        "total_metric_calls": (trace.run.get("summary") or {}).get("metric_calls"),
        "best_idx": best,
        "candidate_ids": [a["candidate_id"] for a in arts],
        "run_id": trace.run_id,
        "seed": trace.run.get("seed"),
    }


def write_gepa(trace: Trace, target: Path) -> dict[str, Any]:
    """A new folder `target` holding gepa_result.json."""
    result = gepa_result(trace)
    check_target(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (tmp / "gepa_result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        _publish(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result
