"""Sandboxed evaluations: one subprocess per evaluation, limits, scrubbed environment, JSON back.

Each evaluation runs `python -I -B evotui_sandbox_runner.py spec.json` in a fresh scratch
directory, in a new session (its own process group) and, where the OS allows, in new user,
network and PID namespaces. The runner applies RLIMIT_CPU/AS/FSIZE/NPROC before loading the
evaluator. stdout and stderr are read with byte caps. A wall-clock timeout kills the whole
group. The engine only ever reads the JSON result file; it never imports task code.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.sandbox.isolation import Isolation, detect, scrubbed_env

SUPPORT_DIR = Path(__file__).resolve().parents[1] / "sandbox_support"
RUNNER = SUPPORT_DIR / "evotui_sandbox_runner.py"
TAIL_CHARS = 2000
"""Characters of stderr kept for feedback to the proposer."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 30.0
    cpu_s: int | None = None
    """CPU seconds (default: the wall timeout rounded up, plus 1)."""
    memory_mb: int = 2048
    """Address-space limit of each sandbox process."""
    nproc: int = 64
    """Processes and threads of one evaluation (enforced inside a user namespace)."""
    fsize_mb: int = 64
    """Largest file the evaluation may write."""
    stdout_cap: int = 64 * 1024
    stderr_cap: int = 64 * 1024
    threads: int = 1
    """OMP/MKL/OpenBLAS/NumExpr threads."""


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


async def _drain(stream: asyncio.StreamReader, cap: int, keep: str) -> tuple[bytes, int]:
    """Read to EOF keeping at most cap bytes (the head or the tail); returns (kept, total)."""
    kept = bytearray()
    total = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(kept), total
        total += len(chunk)
        if keep == "head":
            if len(kept) < cap:
                kept += chunk[: cap - len(kept)]
        else:
            kept += chunk
            if len(kept) > cap:
                del kept[: len(kept) - cap]


class _PidsGroup:
    """A pids cgroup of one evaluation: pids.max set, every member killed and removed at the end."""

    def __init__(self, base: str | None, nproc: int) -> None:
        self.path: str | None = None
        if base is None:
            return
        path = os.path.join(base, f"evotui-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(nproc))
        except OSError:
            self._remove(path)
            return
        self.path = path

    @property
    def procs_file(self) -> str | None:
        return os.path.join(self.path, "cgroup.procs") if self.path else None

    def kill_all(self) -> None:
        if not self.path:
            return
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as fh:
                pids = [int(x) for x in fh.read().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue

    async def close(self) -> None:
        if not self.path:
            return
        for _ in range(50):
            self.kill_all()
            if self._remove(self.path):
                return
            await asyncio.sleep(0.02)

    @staticmethod
    def _remove(path: str) -> bool:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


def _signal_reason(sig: int, limits: SandboxLimits, cpu_s: int) -> str:
    if sig == signal.SIGXCPU:
        return f"CPU time limit exceeded ({cpu_s} s)"
    if sig == signal.SIGXFSZ:
        return f"file size limit exceeded ({limits.fsize_mb} MB)"
    if sig == signal.SIGKILL:
        return f"killed by SIGKILL (CPU limit {cpu_s} s or out of memory)"
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    return f"crashed with signal {name}"


class Sandbox:
    """Runs evaluations with at most `concurrency` at once (independent of LLM concurrency)."""

    def __init__(self, limits: SandboxLimits | None = None, concurrency: int = 2,
                 isolation: Isolation | None = None, python: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.isolation = isolation or detect()
        self.python = python or sys.executable
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self.concurrency = max(1, concurrency)
        self.running = 0
        self.completed = 0

    @property
    def note(self) -> str:
        return self.isolation.note

    async def evaluate(self, evaluator: Path, program_text: str, *, mode: str = "openevolve",
                       cascade: bool = False, thresholds: list[float] | None = None,
                       limits: SandboxLimits | None = None, program_name: str = "program.py") -> EvalResult:
        """Evaluate program_text with an OpenEvolve-style evaluator.py (mode "openevolve") or a
        ShinkaEvolve evaluate.py (mode "shinka")."""
        async with self._sem:
            self.running += 1
            try:
                return await self._run(Path(evaluator).resolve(), program_text, mode, cascade, thresholds or [],
                                       limits or self.limits, program_name)
            finally:
                self.running -= 1
                self.completed += 1

    async def _run(self, evaluator: Path, program_text: str, mode: str, cascade: bool, thresholds: list[float],
                   limits: SandboxLimits, program_name: str) -> EvalResult:
        scratch = Path(tempfile.mkdtemp(prefix="evotui-eval-"))
        t0 = time.monotonic()
        group = _PidsGroup(self.isolation.pids_cgroup, limits.nproc)
        try:
            return await self._run_in(scratch, evaluator, program_text, mode, cascade, thresholds, limits,
                                      program_name, t0, group)
        finally:
            await group.close()
            shutil.rmtree(scratch, ignore_errors=True)

    async def _run_in(self, scratch: Path, evaluator: Path, program_text: str, mode: str, cascade: bool,
                      thresholds: list[float], limits: SandboxLimits, program_name: str, t0: float,
                      group: _PidsGroup) -> EvalResult:
        program = scratch / program_name
        program.write_text(program_text, encoding="utf-8")
        result_path = scratch / ".evotui_result.json"
        cpu_s = limits.cpu_s or int(math.ceil(limits.wall_s)) + 1
        spec = {
            "mode": mode, "evaluator": str(evaluator), "program": str(program), "result": str(result_path),
            "results_dir": str(scratch / "results"), "support_dir": str(SUPPORT_DIR),
            "cascade": cascade, "thresholds": thresholds, "net_guard": not self.isolation.network,
            "cgroup_procs": group.procs_file,
            "limits": {"cpu_s": cpu_s, "memory_bytes": limits.memory_mb * 1024 * 1024,
                       "fsize_bytes": limits.fsize_mb * 1024 * 1024,
                       "nproc": limits.nproc if self.isolation.prefix else None},
        }
        spec_path = scratch / ".evotui_spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        env = scrubbed_env(dict(os.environ), home=str(scratch), threads=limits.threads)
        cmd = [*self.isolation.prefix, self.python, "-I", "-B", str(RUNNER), str(spec_path)]
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=str(scratch), env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            return EvalResult(ok=False, reason=f"cannot start the evaluator process: {exc}", duration_s=time.monotonic() - t0)
        out_task = asyncio.ensure_future(_drain(proc.stdout, limits.stdout_cap, "head"))
        err_task = asyncio.ensure_future(_drain(proc.stderr, limits.stderr_cap, "tail"))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), limits.wall_s)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            # Kill the group on timeout, on cancellation and after a normal exit (stray children).
            _kill_group(proc.pid)
            group.kill_all()
            if proc.returncode is None:
                await proc.wait()
        done, pending = await asyncio.wait({out_task, err_task}, timeout=2.0)
        for task in pending:
            task.cancel()
        (out, out_total) = out_task.result() if out_task in done else (b"", 0)
        (err, err_total) = err_task.result() if err_task in done else (b"", 0)
        res = EvalResult(ok=False, duration_s=time.monotonic() - t0, exit_code=proc.returncode, timed_out=timed_out)
        res.stdout_head = out.decode("utf-8", "replace")
        res.stderr_tail = err.decode("utf-8", "replace")[-TAIL_CHARS:]
        if out_total > limits.stdout_cap:
            res.warnings.append(f"stdout truncated: {out_total} bytes, kept the first {limits.stdout_cap}")
        if err_total > limits.stderr_cap:
            res.warnings.append(f"stderr truncated: {err_total} bytes, kept the last {limits.stderr_cap}")
        if timed_out:
            res.reason = f"timeout: killed after {limits.wall_s:g} s wall clock"
            return res
        rc = proc.returncode
        if rc is not None and rc < 0:
            res.reason = _signal_reason(-rc, limits, cpu_s)
            return res
        if not result_path.is_file():
            res.reason = f"the evaluation exited with code {rc} without writing a result (os._exit, crash or killed)"
            return res
        if rc not in (0, None) and rc > 128 and rc - 128 in signal.Signals._value2member_map_:
            res.reason = _signal_reason(rc - 128, limits, cpu_s)
            return res
        return _interpret(res, result_path)


def _interpret(res: EvalResult, result_path: Path) -> EvalResult:
    try:
        data = json.loads(result_path.read_text(encoding="utf-8", errors="replace")[:4_000_000])
    except json.JSONDecodeError as exc:
        res.reason = f"non-JSON result from the evaluation ({exc.msg})"
        return res
    if not isinstance(data, dict):
        res.reason = f"the evaluation result is a JSON {type(data).__name__}, not an object"
        return res
    metrics_raw = data.get("metrics") or {}
    res.feedback = {str(k): str(v) for k, v in (data.get("artifacts") or {}).items()}
    res.private = data.get("private") or {}
    res.stages = list(data.get("stages") or [])
    metrics: dict[str, float] = {}
    for key, value in metrics_raw.items() if isinstance(metrics_raw, dict) else []:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                metrics[str(key)] = float(value)
            elif key != "combined_score":
                res.warnings.append(f"metric {key!r} is {value}; dropped")
    res.metrics = metrics
    if not data.get("ok"):
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
