"""The evaluation proper, run by the sandbox's worker process after confinement.

Loads the task's evaluator (OpenEvolve evaluate(program_path), optional cascade stages, or a
ShinkaEvolve evaluate.py run as a script) and turns what it returns into a plain dict:
{"ok": true, "metrics": {...}, "artifacts": {...}, "stages": [...]} or
{"ok": false, "kind": ..., "error": ...}. A cascade stage that passes with stages still to run is
also reported as it ends (`on_stage`), so the engine may act on its score early (speculation).
"""

import asyncio
import importlib.util
import inspect
import json
import math
import os
import resource
import runpy
import sys
import traceback

ARTIFACT_CAP = 8192


def set_limits(spec):
    lim = spec.get("limits", {})
    pairs = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_CPU, lim.get("cpu_s"), (lim.get("cpu_s") or 0) + 1),
        (resource.RLIMIT_AS, lim.get("memory_bytes"), lim.get("memory_bytes")),
        (resource.RLIMIT_FSIZE, lim.get("fsize_bytes"), lim.get("fsize_bytes")),
        (resource.RLIMIT_NPROC, lim.get("nproc"), lim.get("nproc")),
    ]
    for which, soft, hard in pairs:
        if soft:
            resource.setrlimit(which, (int(soft), int(hard)))


def block_network():
    """Fallback when no network namespace is available: refuse socket use from Python code."""
    banned = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
              "socket.gethostbyname", "socket.gethostbyaddr"}

    def hook(event, args):
        if event in banned:
            raise PermissionError(f"network access is disabled in the evotui sandbox ({event})")

    sys.addaudithook(hook)


def clean(value):
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value[:ARTIFACT_CAP]
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, default=str, allow_nan=True)[:ARTIFACT_CAP]
        except (TypeError, ValueError):
            return repr(value)[:ARTIFACT_CAP]
    return repr(value)[:ARTIFACT_CAP]


def numeric(key, value):
    """A metric value, cleaned; a combined_score given as a numeric string ("0.9") is a number, as
    OpenEvolve accepts it. Other strings stay strings (they are feedback for the proposer)."""
    value = clean(value)
    if key == "combined_score" and isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


def as_result(raw, where):
    """(metrics, artifacts) of an evaluate() return value: a dict or an EvaluationResult."""
    if hasattr(raw, "metrics") and hasattr(raw, "artifacts"):
        metrics, artifacts = dict(raw.metrics or {}), dict(raw.artifacts or {})
    elif isinstance(raw, dict):
        metrics, artifacts = dict(raw), {}
    else:
        raise TypeError(f"{where} returned {type(raw).__name__}; return a dict of metrics")
    out_m, out_a = {}, {}
    for key, value in metrics.items():
        value = numeric(key, value)
        (out_m if isinstance(value, float) else out_a)[str(key)] = value
    for key, value in artifacts.items():
        out_a[str(key)] = clean(value)
    return out_m, out_a


def stage_score(metrics):
    if "combined_score" in metrics:
        return metrics["combined_score"]
    nums = [v for v in metrics.values() if math.isfinite(v)]
    return sum(nums) / len(nums) if nums else 0.0


def run_openevolve(spec, on_stage=None):
    path = spec["evaluator"]
    mod_spec = importlib.util.spec_from_file_location("evaluator", path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules["evaluator"] = module
    mod_spec.loader.exec_module(module)
    program = spec["program"]
    stages = []
    if spec.get("cascade") and callable(getattr(module, "evaluate_stage1", None)):
        names = [n for n in ("evaluate_stage1", "evaluate_stage2", "evaluate_stage3") if callable(getattr(module, n, None))]
    else:
        if not callable(getattr(module, "evaluate", None)):
            raise AttributeError(f"{os.path.basename(path)} defines no evaluate(program_path) function")
        names = ["evaluate"]
    # Thresholds belong to a cascade: a single evaluate() is never "stopped after" anything.
    thresholds = list(spec.get("thresholds") or []) if names != ["evaluate"] else []
    metrics, artifacts = {}, {}
    for k, name in enumerate(names):
        raw = getattr(module, name)(program)
        if inspect.iscoroutine(raw):  # OpenEvolve awaits async evaluators; so do we
            raw = asyncio.run(raw)
        m, a = as_result(raw, name)
        metrics.update(m)
        artifacts.update(a)
        score = stage_score(m)
        passed = k >= len(thresholds) or score >= thresholds[k]
        stages.append({"name": name, "score": score, "passed": passed})
        if passed and k < len(names) - 1 and on_stage is not None:
            on_stage({"name": name, "score": score, "index": k, "of": len(names)})
        if not passed:
            artifacts["cascade"] = f"stopped after {name}: score {score:.4g} below threshold {thresholds[k]:.4g}"
            break
    return {"ok": True, "metrics": metrics, "artifacts": artifacts, "stages": stages}


def run_shinka(spec):
    results_dir = spec["results_dir"]
    os.makedirs(results_dir, exist_ok=True)
    sys.argv = [spec["evaluator"], "--program_path", spec["program"], "--results_dir", results_dir]
    code = 0
    try:
        runpy.run_path(spec["evaluator"], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    metrics_path = os.path.join(results_dir, "metrics.json")
    correct_path = os.path.join(results_dir, "correct.json")
    if not os.path.isfile(metrics_path):
        return {"ok": False, "kind": "no_result", "error": f"evaluate.py (exit code {code}) wrote no metrics.json"}
    with open(metrics_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    correct = {"correct": True, "error": None}
    if os.path.isfile(correct_path):
        with open(correct_path, encoding="utf-8") as fh:
            correct = json.load(fh)
    metrics, artifacts, private = {}, {}, {}
    for key, value in raw.items():
        if key == "public" and isinstance(value, dict):
            for k, v in value.items():
                v = clean(v)
                (metrics if isinstance(v, float) else artifacts)[str(k)] = v
        elif key == "private" and isinstance(value, dict):
            private = {str(k): clean(v) for k, v in value.items()}
        else:
            v = numeric(key, value)
            (metrics if isinstance(v, float) else artifacts)[str(key)] = v
    if not correct.get("correct", False):
        err = correct.get("error") or "evaluate.py marked the program incorrect"
        return {"ok": False, "kind": "incorrect", "error": f"incorrect: {str(err)[:2000]}", "metrics": metrics,
                "artifacts": artifacts}
    return {"ok": True, "metrics": metrics, "artifacts": artifacts, "private": private, "stages": []}


class ImportWatch:
    """Records ImportErrors raised by import statements in the evaluator or the candidate, even
    when the evaluator catches them: an evaluator that swallows one usually scores 0 for a missing
    module, not for a bad program, and the user should hear about it."""

    def __init__(self, files):
        self.files = {os.path.realpath(f) for f in files}
        self.seen = []
        self._original = None

    def __enter__(self):
        import builtins

        self._original = original = builtins.__import__

        def watched(name, globals=None, locals=None, fromlist=(), level=0):
            try:
                return original(name, globals, locals, fromlist, level)
            except ImportError as exc:
                where = (globals or {}).get("__file__")
                if where and os.path.realpath(where) in self.files and len(self.seen) < 5:
                    self.seen.append(f"{os.path.basename(where)}: {exc}")
                raise

        builtins.__import__ = watched
        return self

    def __exit__(self, *exc_info):
        import builtins

        builtins.__import__ = self._original
        return False

    def warnings(self):
        return [f"an import failed while evaluating ({seen}); if the evaluator caught it, its score "
                "reflects the missing module, not the program" for seen in self.seen]


def guard(spec):
    """Before any evaluator code runs: the candidate gets a process of its own wherever the evaluator
    loads it, here and in the evaluator's Python subprocesses (evotui_candidate_guard.py), which also
    refuse Python sockets when the sandbox has no network namespace (guard_site/sitecustomize.py)."""
    import evotui_candidate_guard

    if spec.get("net_guard"):
        os.environ["EVOTUI_SANDBOX_NET_GUARD"] = "1"
        evotui_candidate_guard.add_guard_site()
    if spec.get("candidate_process"):
        evotui_candidate_guard.install(spec["program"], spec["scratch"], spec["confine"].get("landlock", 0),
                                       [os.path.dirname(os.path.realpath(spec["evaluator"]))])


def evaluate(spec, on_stage=None):
    """Run the evaluator; its failure (whatever it is) becomes the result, never an exception.
    on_stage(stage): a cascade stage passed and more follow (OpenEvolve evaluators only)."""
    sys.path[:0] = [spec["support_dir"], os.path.dirname(spec["evaluator"])]
    guard(spec)
    watch = ImportWatch([spec["evaluator"], spec["program"]])
    with watch:
        out = _evaluate(spec, on_stage)
    if watch.seen and out.get("ok"):
        out["warnings"] = [*out.get("warnings", []), *watch.warnings()]
    return out


def _evaluate(spec, on_stage):
    try:
        return run_shinka(spec) if spec["mode"] == "shinka" else run_openevolve(spec, on_stage)
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": "out of memory (MemoryError): the address-space limit was hit"}
    except SystemExit as exc:
        return {"ok": False, "kind": "exit", "error": f"the evaluated code called sys.exit({exc.code!r})"}
    except BaseException as exc:  # the evaluated code's failure is the result, whatever it is
        missing = (exc.name or "") if isinstance(exc, ModuleNotFoundError) else ""
        if missing.split(".")[0] in ("shinka", "openevolve"):
            # Only the helpers evaluators use are provided inside the sandbox (see README.md here).
            return {"ok": False, "kind": "exception", "error": (
                f"the evaluator imports {missing}, which evotui does not provide inside the sandbox; it "
                "provides shinka.core.run_shinka_eval and openevolve.evaluation_result.EvaluationResult")}
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return {"ok": False, "kind": "exception", "error": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": "".join(tb)[-4000:]}
