"""`shinka.core.run_shinka_eval`, written for evotui from ShinkaEvolve's documented behaviour.

run_shinka_eval(program_path, results_dir, experiment_fn_name, num_runs,
                get_experiment_kwargs=None, aggregate_metrics_fn=None, validate_fn=None,
                plotting_fn=None, default_metrics_on_error=None, **newer_options)
  -> (metrics, correct, first_error)

Loads the candidate module, calls its experiment function num_runs times (kwargs from
get_experiment_kwargs(run_index), plus file_path where the function takes it as older releases
passed it, or seed=run_index + 1 without get_experiment_kwargs), validates
each result, aggregates them, adds execution-time statistics and the validation counts, and
writes metrics.json and correct.json (extra.pkl for an `extra_data` metric) into results_dir,
as ShinkaEvolve does. Plots and the options of newer releases (parallel runs, early stopping)
are accepted; runs go sequentially to completion and a note on stderr names what was skipped.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import pickle
import statistics
import sys
import time
from typing import Any, Callable

DEFAULT_METRICS_ON_ERROR: dict[str, Any] = {
    "combined_score": 0.0,
    "execution_time_mean": 0.0,
    "execution_time_std": 0.0,
    "num_successful_runs": 0,
    "num_valid_runs": 0,
    "num_invalid_runs": 0,
    "all_validation_errors": [],
}


def load_program(program_path: str) -> Any:
    spec = importlib.util.spec_from_file_location("program", program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a Python module from {program_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_json_results(results_dir: str, metrics: dict[str, Any], correct: bool, error: str | None = None) -> None:
    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, "correct.json"), "w", encoding="utf-8") as fh:
        json.dump({"correct": correct, "error": error}, fh, indent=2, default=str)
    with open(os.path.join(results_dir, "metrics.json"), "w", encoding="utf-8") as fh:
        json.dump(metrics, fh, indent=2, default=str)


def _run_all(program_path: str, experiment_fn_name: str, num_runs: int,
             get_experiment_kwargs: Callable[[int], dict] | None,
             validate_fn: Callable[[Any], tuple[bool, str | None]] | None):
    module = load_program(program_path)
    experiment = getattr(module, experiment_fn_name, None)
    if experiment is None:
        raise AttributeError(f"experiment function {experiment_fn_name!r} not found in {program_path}")
    results, times, errors = [], [], []
    valid = invalid = 0
    takes_path = _accepts(experiment, "file_path")
    for run in range(num_runs):
        if get_experiment_kwargs is None:
            kwargs = {"seed": run + 1}
        else:
            kwargs = dict(get_experiment_kwargs(run))
            if takes_path:
                kwargs.setdefault("file_path", program_path)
        t0 = time.perf_counter()
        result = experiment(**kwargs)
        times.append(time.perf_counter() - t0)
        results.append(result)
        if validate_fn is None:
            continue
        ok, message = validate_fn(result)
        if ok:
            valid += 1
            continue
        invalid += 1
        if message and message not in errors:
            errors.append(message)
    return results, times, valid, invalid, errors


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def run_shinka_eval(program_path: str, results_dir: str, experiment_fn_name: str, num_runs: int,
                    get_experiment_kwargs: Callable[[int], dict] | None = None,
                    aggregate_metrics_fn: Callable[[list], dict] | None = None,
                    validate_fn: Callable[[Any], tuple[bool, str | None]] | None = None,
                    plotting_fn: Callable[[Any], list] | None = None,
                    default_metrics_on_error: dict[str, Any] | None = None,
                    **newer_options: Any) -> tuple[dict[str, Any], bool, str | None]:
    skipped = sorted(k for k, v in {**newer_options, "plotting_fn": plotting_fn}.items() if v not in (None, 1))
    if skipped:
        print(f"evotui shinka stand-in: runs sequentially to completion, without {', '.join(skipped)}",
              file=sys.stderr)
    correct, first_error = True, None
    try:
        results, times, valid, invalid, errors = _run_all(program_path, experiment_fn_name, num_runs,
                                                           get_experiment_kwargs, validate_fn)
        if aggregate_metrics_fn is not None:
            metrics = dict(aggregate_metrics_fn(results))
        else:
            metrics = {"num_successful_runs": len(results),
                       "first_run_result_type": str(type(results[0])) if results else "N/A",
                       "raw_results_preview": str(results[:2]) if results else "N/A"}
        metrics["execution_time_mean"] = statistics.fmean(times) if times else 0.0
        metrics["execution_time_std"] = statistics.pstdev(times) if times else 0.0
        if validate_fn is not None:
            metrics.update(num_valid_runs=valid, num_invalid_runs=invalid, all_validation_errors=errors)
            if invalid:
                correct = False
                first_error = f"Validation failed: {errors[0]}" if errors else "Validation failed"
    except Exception as exc:  # the candidate's failure is its score, as in ShinkaEvolve
        print(f"Evaluation error: {exc}", file=sys.stderr)
        base = dict(DEFAULT_METRICS_ON_ERROR)
        base.update(default_metrics_on_error or {})
        metrics = {key: base[key] for key in DEFAULT_METRICS_ON_ERROR}
        correct, first_error = False, str(exc)
    if "extra_data" in metrics:
        os.makedirs(results_dir, exist_ok=True)
        with open(os.path.join(results_dir, "extra.pkl"), "wb") as fh:
            pickle.dump(metrics.pop("extra_data"), fh)
    save_json_results(results_dir, metrics, correct, first_error)
    return metrics, correct, first_error
