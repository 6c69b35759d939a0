"""An OpenEvolve checkpoint (openevolve/database.py `save`): `checkpoint_N/metadata.json` (islands,
archive, best_program_id, last_iteration) and `checkpoint_N/programs/<id>.json` (a Program's
to_dict: code, parent_id, generation, iteration_found, timestamp, metrics, metadata and, when
prompts are logged, prompts = {template: {system, user, responses}}).

The path may be the checkpoint itself, its `checkpoints/` folder or the run's output folder; the
latest checkpoint (highest N) is read. A checkpoint holds the population, not every program ever
made: a parent OpenEvolve dropped is kept as an id in the child's meta (missing_parents)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from engine.trace.errors import TraceError
from engine.trace.importers.common import NativeCandidate, NativeRun, finite

_CHECKPOINT = re.compile(r"checkpoint_(\d+)$")
_PATCH_FORMATS = {"diff": "diff", "full": "full", "rewrite": "full"}


def _is_checkpoint(folder: Path) -> bool:
    return (folder / "metadata.json").is_file() and (folder / "programs").is_dir()


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for base in (folder, folder / "checkpoints"):
        if base.is_dir():
            for sub in base.iterdir():
                m = _CHECKPOINT.match(sub.name)
                if m and _is_checkpoint(sub):
                    found.append((int(m.group(1)), sub))
    return sorted(found)


def find_checkpoint(path: Path) -> Path | None:
    """The checkpoint folder `path` is or holds (the latest), else None."""
    if not path.is_dir():
        return None
    if _is_checkpoint(path):
        return path
    found = _checkpoints(path)
    return found[-1][1] if found else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not readable JSON ({exc}); is the checkpoint complete?") from None


def score_of(metrics: dict[str, Any]) -> float | None:
    """OpenEvolve's own fitness: combined_score, else the mean of the numeric metrics."""
    if "combined_score" in metrics:
        return finite(metrics["combined_score"])
    values = [v for v in (finite(m) for m in metrics.values()) if v is not None]
    return sum(values) / len(values) if values else None


def _calls(prompts: Any, model: str | None, usage: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for entry in (prompts or {}).values() if isinstance(prompts, dict) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("user"), str):
            continue
        messages = [{"role": "system", "content": entry["system"]}] if isinstance(entry.get("system"), str) else []
        messages.append({"role": "user", "content": entry["user"]})
        responses = [r for r in entry.get("responses") or [] if isinstance(r, str)]
        calls.append({"model": model, "messages": messages, "response": responses[0] if responses else None,
                      "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")})
    return calls


def read(path: Path) -> NativeRun:
    checkpoint = find_checkpoint(path)
    if checkpoint is None:
        raise TraceError(f"{path}: no OpenEvolve checkpoint (checkpoint_N/ with metadata.json and programs/)")
    meta = _read_json(checkpoint / "metadata.json")
    if not isinstance(meta, dict):
        raise TraceError(f"{checkpoint / 'metadata.json'}: not a JSON object")
    candidates = []
    for file in sorted((checkpoint / "programs").glob("*.json")):
        prog = _read_json(file)
        if not isinstance(prog, dict) or not isinstance(prog.get("id"), str) or not isinstance(prog.get("code"), str):
            raise TraceError(f"{file}: not an OpenEvolve program (needs string fields id and code)")
        metrics = prog.get("metrics") if isinstance(prog.get("metrics"), dict) else {}
        info = prog.get("metadata") if isinstance(prog.get("metadata"), dict) else {}
        usage = info.get("token_usage") if isinstance(info.get("token_usage"), dict) else {}
        score = score_of(metrics)
        candidates.append(NativeCandidate(
            source_id=prog["id"], text=prog["code"],
            parent_source_ids=[prog["parent_id"]] if prog.get("parent_id") else [],
            score=score, iteration=int(prog.get("iteration_found") or 0),
            created_at=float(prog.get("timestamp") or 0.0),
            val_scores={"combined_score": score} if score is not None else None,
            meta={"metrics": metrics, "generation": prog.get("generation"), "language": prog.get("language"),
                  "island": info.get("island"), "changes": info.get("changes") or prog.get("changes_description"),
                  "evolution_mode": info.get("evolution_mode"),
                  # OpenEvolve's diff mode is SEARCH/REPLACE blocks, evotui's "diff"; full rewrites are "full".
                  "patch_format": _PATCH_FORMATS.get(info.get("evolution_mode"))},
            calls=_calls(prog.get("prompts"), info.get("llm_model"), usage)))
    # Creation order: the seed first, then as OpenEvolve found them.
    candidates.sort(key=lambda c: (bool(c.parent_source_ids), c.iteration, c.created_at, c.source_id))
    m = _CHECKPOINT.match(checkpoint.name)
    details = {"checkpoint": str(checkpoint.resolve()), "last_iteration": meta.get("last_iteration"),
               "source_best_id": meta.get("best_program_id"), "islands": len(meta.get("islands") or [])}
    if m:
        details["checkpoint_iteration"] = int(m.group(1))
    created = min((c.created_at for c in candidates), default=(checkpoint / "metadata.json").stat().st_mtime)
    return NativeRun("openevolve", checkpoint, "program", candidates, created, details)
