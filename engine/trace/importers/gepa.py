"""A GEPA run_dir (gepa/core/state.py GEPAState.save): `gepa_state.bin` (the state's attributes as
a pickled dict: program_candidates as {component: text}, parent_program_for_candidate as index
lists, prog_candidate_val_subscores as {val id: score}, num_metric_calls_by_discovery,
full_program_trace with each iteration's new_program_idx), beside candidates.json and run_log.json.

The pickle is read with an unpickler that builds plain data only (dicts, lists, sets, numbers,
numpy scalars); any other object in it (a custom cache, a class of the adapter) is refused, so no
code from the file runs. GEPA records no times: every candidate gets the state file's time and
the order of discovery is kept by their ids."""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from engine.components import Component, render, to_json
from engine.trace.errors import TraceError
from engine.trace.importers.common import NativeCandidate, NativeRun, finite

STATE_FILE = "gepa_state.bin"
_SAFE = {("builtins", n) for n in ("set", "frozenset", "dict", "list", "tuple", "complex")} | {
    ("collections", "OrderedDict"),
    ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}
_NEEDED = ("program_candidates", "parent_program_for_candidate", "prog_candidate_val_subscores")


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise TraceError(f"holds a {module}.{name} object; evotui reads only plain data from it "
                         "(no code from the file runs)")


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / STATE_FILE).is_file()


def _load(path: Path) -> dict[str, Any]:
    file = path / STATE_FILE
    try:
        state = _PlainData(io.BytesIO(file.read_bytes())).load()
    except TraceError as exc:
        raise TraceError(f"{file}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a damaged file
        raise TraceError(f"{file}: not a readable GEPA state ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or any(k not in state for k in _NEEDED):
        raise TraceError(f"{file}: not a GEPA state (needs {', '.join(_NEEDED)})")
    lengths = {k: len(state[k]) for k in _NEEDED}
    if len(set(lengths.values())) != 1:
        raise TraceError(f"{file}: inconsistent GEPA state (lengths {lengths})")
    return state


def _text_of(candidate: dict[str, str]) -> tuple[str, list[dict[str, Any]] | None]:
    """One component: its text; several: evotui's rendering and the components (engine/components/__init__.py)."""
    if len(candidate) == 1:
        return str(next(iter(candidate.values()))), None
    parts = [Component(str(name), str(text)) for name, text in candidate.items()]
    return render(parts), to_json(parts)


def _iterations(trace: list[Any]) -> dict[int, int]:
    found = {}
    for entry in trace if isinstance(trace, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("i"), int):
            for idx in entry.get("new_program_indices") or [entry.get("new_program_idx")]:
                if isinstance(idx, int):
                    found.setdefault(idx, entry["i"] + 1)  # GEPA's i counts from 0; the seed is 0
    return found


def read(path: Path) -> NativeRun:
    state = _load(path)
    when = (path / STATE_FILE).stat().st_mtime
    iterations = _iterations(state.get("full_program_trace"))
    discovery = state.get("num_metric_calls_by_discovery") or []
    candidates = []
    for idx, (cand, parents, subscores) in enumerate(zip(
            state["program_candidates"], state["parent_program_for_candidate"], state["prog_candidate_val_subscores"])):
        if not isinstance(cand, dict) or not cand:
            raise TraceError(f"{path / STATE_FILE}: candidate {idx} is not a {{component: text}} dict")
        text, components = _text_of(cand)
        scores = {str(k): f for k, v in dict(subscores).items() if (f := finite(v)) is not None}
        mean = sum(scores.values()) / len(scores) if scores else None
        candidates.append(NativeCandidate(
            source_id=str(idx), text=text, components=components,
            parent_source_ids=[str(p) for p in parents or [] if p is not None],
            score=mean, iteration=iterations.get(idx, 0 if idx == 0 else idx), created_at=when,
            val_scores=scores or None,
            meta={"metric_calls_at_discovery": discovery[idx] if idx < len(discovery) else None}))
    details = {"iterations": (state.get("i", -1) + 1) if isinstance(state.get("i"), int) else None,
               "metric_calls": state.get("total_num_evals"), "components": list(state.get("list_of_named_predictors") or []),
               "frontier_type": state.get("frontier_type")}
    return NativeRun("gepa", path, "prompt", candidates, when, details)
