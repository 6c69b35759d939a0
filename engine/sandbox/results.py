"""Turning the runner's report into an EvalResult (fitness, metrics, feedback, failure reason)."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field

TAIL_CHARS = 2000
"""Characters of stderr kept for feedback to the proposer."""


@dataclass
class EvalResult:
    ok: bool
    score: float | None = None
    """The fitness: combined_score, or the mean of the numeric metrics (with a warning)."""
    metrics: dict[str, float] = field(default_factory=dict)
    feedback: dict[str, str] = field(default_factory=dict)
    """String values and artifacts for the next proposal."""
    private: dict = field(default_factory=dict)
    reason: str = ""
    """Why the evaluation failed (one line), empty when ok."""
    stderr_tail: str = ""
    stdout_head: str = ""
    warnings: list[str] = field(default_factory=list)
    stages: list[dict] = field(default_factory=list)
    duration_s: float = 0.0
    exit_code: int | None = None
    timed_out: bool = False
    kind: str = ""
    """The runner's failure kind ("exception", "incorrect", "memory", ...), empty when ok or unknown."""
    attempts: int = 1
    """Evaluations run for this result (more than 1 when the evaluator raised and retries were allowed)."""


def signal_reason(sig: int, fsize_mb: int, cpu_s: int) -> str:
    if sig == signal.SIGXCPU:
        return f"CPU time limit exceeded ({cpu_s} s)"
    if sig == signal.SIGXFSZ:
        return f"file size limit exceeded ({fsize_mb} MB)"
    if sig == signal.SIGKILL:
        return f"killed by SIGKILL (CPU limit {cpu_s} s or out of memory)"
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    return f"crashed with signal {name}"



def interpret(res: EvalResult, data: object) -> EvalResult:
    """Fill res from the worker's result dict."""
    if not isinstance(data, dict):
        res.reason = f"the evaluation result is a JSON {type(data).__name__}, not an object"
        return res
    metrics_raw = data.get("metrics") or {}
    res.feedback = {str(k): str(v) for k, v in (data.get("artifacts") or {}).items()}
    res.private = data.get("private") or {}
    res.stages = list(data.get("stages") or [])
    res.warnings.extend(str(w) for w in data.get("warnings") or [])
    metrics: dict[str, float] = {}
    for key, value in metrics_raw.items() if isinstance(metrics_raw, dict) else []:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                metrics[str(key)] = float(value)
            elif key != "combined_score":
                res.warnings.append(f"metric {key!r} is {value}; dropped")
    res.metrics = metrics
    if not data.get("ok"):
        res.kind = str(data.get("kind") or "")
        res.reason = str(data.get("error") or "evaluation failed")
        if data.get("traceback"):
            res.stderr_tail = (res.stderr_tail + "\n" + str(data["traceback"]))[-TAIL_CHARS:]
        return res
    if "combined_score" in metrics_raw:
        value = metrics_raw["combined_score"]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            res.reason = f"combined_score is {value!r}, not a finite number"
            return res
        res.score = float(value)
    else:
        nums = [v for k, v in metrics.items()]
        if not nums:
            res.reason = "the evaluator returned no numeric metrics (return a dict with combined_score)"
            return res
        res.score = sum(nums) / len(nums)
        res.warnings.append(f"no combined_score; the fitness is the mean of {len(nums)} numeric metric(s)")
    res.ok = True
    return res
