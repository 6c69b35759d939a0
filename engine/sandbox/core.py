"""Sandboxed evaluations: one runner process per evaluation, confined, with limits; a report back.

Each evaluation runs `python -I -B evotui_sandbox_runner.py SPEC_FD RESULT_FD` in a fresh scratch
directory, in a new session, with the confinement that engine/sandbox/isolation.py found (see
there, and the runner's docstring for the result channel). The runner's supervisor enforces the
wall clock and kills every leftover process; the engine keeps a backstop: after the wall clock
plus a grace period it asks the supervisor to stop (SIGTERM), then kills the session, the pids
cgroup and, in uid mode, every process of the evaluation's uid. stdout and stderr are read with
byte caps. The engine never imports task code and reads no file the evaluation could write.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.sandbox import channel, uids
from engine.sandbox.cgroups import PidsGroup
from engine.sandbox.gpu_slots import GpuSlots, Slot, strip_device_vars
from engine.sandbox.channel import SUPPORT_DIR
from engine.sandbox.isolation import Isolation, confine_spec, detect, scrubbed_env
from engine.sandbox.limit_hints import with_hint
from engine.sandbox.readable import readable_paths
from engine.sandbox.toolchains import toolchain_env
from engine.sandbox.results import TAIL_CHARS, EvalResult, interpret, signal_reason

__all__ = ["EvalResult", "SUPPORT_DIR", "Sandbox", "SandboxLimits"]

GRACE_S = 8.0
"""Beyond the wall clock: the supervisor's own cleanup (up to 5 s) plus start-up."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 30.0
    cpu_s: int | None = None
    """CPU seconds (default: the wall timeout rounded up, plus 1)."""
    memory_mb: int = 2048
    """Address-space limit of each sandbox process."""
    nproc: int = 64
    """Processes and threads of one evaluation (pids cgroup; RLIMIT_NPROC in a user namespace or uid mode)."""
    fsize_mb: int = 64
    """Largest file the evaluation may write."""
    stdout_cap: int = 64 * 1024
    stderr_cap: int = 64 * 1024
    threads: int = 1
    """OMP/MKL/OpenBLAS/NumExpr threads."""
    read_paths: tuple[str, ...] = ()
    """Further paths evaluated code may read (toolchains, caches); see engine/sandbox/readable.py."""
    candidate_process: bool = True
    """A Python candidate that the evaluator loads runs in a process of its own, so it cannot forge
    the evaluator's result (engine/sandbox_support/evotui_candidate_guard.py); False trusts it."""
    retries: int = 0
    """Evaluations run again when the evaluator raised (OpenEvolve's evaluator.max_retries): a flaky
    evaluator gets another try; timeouts and limits are never retried (they would only repeat)."""


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


async def _read_reports(stream: asyncio.StreamReader, nonce: str,
                        on_stage: Callable[[dict], None] | None) -> tuple[bytes, int]:
    """The supervisor's report pipe: stage lines (channel.stage_line) go to on_stage as they
    arrive; what remains is the final report, kept up to REPORT_CAP bytes (as _drain keeps it)."""
    kept, total = bytearray(), 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(kept), total
        total += len(chunk)
        if len(kept) < channel.REPORT_CAP:
            kept += chunk[: channel.REPORT_CAP - len(kept)]
        while (cut := kept.find(b"\n")) >= 0:
            stage = channel.stage_line(bytes(kept[:cut]), nonce)
            if stage is None:
                break  # not a stage line: the final report (json.dumps writes no newline)
            del kept[: cut + 1]
            if on_stage is not None:
                on_stage(stage)


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))
    return reader, transport


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


class Sandbox:
    """Runs evaluations with at most `concurrency` at once (independent of LLM concurrency).
    Scratch directories go to scratch_root (default: the system temp directory)."""

    def __init__(self, limits: SandboxLimits | None = None, concurrency: int = 2,
                 isolation: Isolation | None = None, python: str | None = None,
                 scratch_root: str | Path | None = None, secret_vars: frozenset[str] = frozenset(),
                 gpu_slots: GpuSlots | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.gpu_slots = gpu_slots
        """Each evaluation leases one (engine/sandbox/gpu_slots.py); None: devices left as they are."""
        self.secret_vars = secret_vars
        """Environment variables never passed to evaluated code (the run's API key variables)."""
        self._readable_paths: dict[tuple[Path, tuple[str, ...]], list[str]] = {}
        """(task folder, declared paths) -> what evaluated code may read there (see _readable)."""
        self.isolation = isolation or detect()
        self.python = python or sys.executable
        self.scratch_root = str(scratch_root or tempfile.gettempdir())
        self.tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        """In the names of this sandbox's scratch directories and cgroups."""
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self.concurrency = max(1, concurrency)
        self.running = 0
        self.completed = 0

    @property
    def note(self) -> str:
        return self.isolation.describe()

    async def evaluate(self, evaluator: Path, program_text: str, *, mode: str = "openevolve",
                       cascade: bool = False, thresholds: list[float] | None = None,
                       limits: SandboxLimits | None = None, program_name: str = "program.py",
                       on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        """Evaluate program_text with an OpenEvolve-style evaluator.py (mode "openevolve") or a
        ShinkaEvolve evaluate.py (mode "shinka"). on_stage({name, score, index, of}): a cascade
        stage passed with stages still to run (called while the evaluation goes on; a retried
        evaluation may report a stage again)."""
        limits = limits or self.limits
        async with self._sem, (self.gpu_slots.lease() if self.gpu_slots else nullcontext()) as slot:
            self.running += 1
            try:
                res = await self._run(Path(evaluator).resolve(), program_text, mode, cascade, thresholds or [],
                                      limits, program_name, slot, on_stage)
                raised: list[str] = []
                while not res.ok and res.kind == "exception" and len(raised) < limits.retries:
                    raised.append(res.reason)
                    res = await self._run(Path(evaluator).resolve(), program_text, mode, cascade,
                                          thresholds or [], limits, program_name, slot, on_stage)
                if raised:
                    res.warnings.append(f"the evaluator raised on {len(raised)} attempt(s) before this one "
                                        f"(first: {raised[0][:200]}); evaluator retries allowed: {limits.retries}")
                res.attempts = len(raised) + 1
                return with_hint(res, limits)
            finally:
                self.running -= 1
                self.completed += 1

    def _confinement(self, evaluator: Path) -> tuple[Isolation, str]:
        """uid mode needs the task folder, scratch root and interpreter readable by a stranger;
        otherwise this evaluation runs as root without capabilities (under Landlock if any)."""
        iso = self.isolation
        if not iso.uid_switch:
            return iso, ""
        blocked = [p for p, ok in ((str(evaluator), uids.reachable(str(evaluator))),
                                   (str(evaluator.parent), uids.dir_reachable(str(evaluator.parent))),
                                   (self.scratch_root, uids.dir_reachable(self.scratch_root)),
                                   (self.python, uids.reachable(self.python, execute=True))) if not ok]
        if not blocked:
            return iso, ""
        fallback = Isolation(iso.prefix, iso.network, iso.pid_namespace, pids_cgroup=iso.pids_cgroup,
                             landlock=iso.landlock, drop_caps=True, cgroup_version=iso.cgroup_version)
        how = "under Landlock (writes only in scratch)" if iso.landlock else "UNCONFINED (no Landlock here)"
        return fallback, (f"ran as root without capabilities {how}, not as an unprivileged uid: "
                          f"{blocked[0]} is not readable by other users")

    async def _run(self, evaluator: Path, program_text: str, mode: str, cascade: bool, thresholds: list[float],
                   limits: SandboxLimits, program_name: str, slot: Slot | None = None,
                   on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        scratch = Path(tempfile.mkdtemp(prefix=f"evotui-eval-{self.tag}-", dir=self.scratch_root))
        t0 = time.monotonic()
        iso, warning = self._confinement(evaluator)
        group = PidsGroup(iso.pids_cgroup, limits.nproc, self.tag)
        lease = uids.UidLease() if iso.uid_switch else None
        try:
            res = await self._run_in(scratch, evaluator, program_text, mode, cascade, thresholds, limits,
                                     program_name, t0, group, iso, lease.uid if lease else None, slot, on_stage)
            if warning:
                res.warnings.append(warning)
            return res
        finally:
            await group.close()
            if lease:
                uids.kill_uid(lease.uid)
                lease.close()
            shutil.rmtree(scratch, ignore_errors=True)

    async def _run_in(self, scratch: Path, evaluator: Path, program_text: str, mode: str, cascade: bool,
                      thresholds: list[float], limits: SandboxLimits, program_name: str, t0: float,
                      group: PidsGroup, iso: Isolation, uid: int | None, slot: Slot | None = None,
                      on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        program = scratch / program_name
        program.write_text(program_text, encoding="utf-8")
        cpu_s = limits.cpu_s or int(math.ceil(limits.wall_s)) + 1
        spec = {
            "mode": mode, "evaluator": str(evaluator), "program": str(program), "scratch": str(scratch),
            "results_dir": str(scratch / "results"), "support_dir": str(SUPPORT_DIR), "wall_s": limits.wall_s,
            "cascade": cascade, "thresholds": thresholds, "net_guard": not iso.network,
            "cgroup_procs": group.procs_file, "confine": confine_spec(iso, uid, self._readable(evaluator, limits)),
            "candidate_process": limits.candidate_process and program_name.endswith(".py"),
            "limits": {"cpu_s": cpu_s, "memory_bytes": limits.memory_mb * 1024 * 1024,
                       "fsize_bytes": limits.fsize_mb * 1024 * 1024,
                       "nproc": limits.nproc if (iso.prefix or uid is not None) else None},
        }
        nonce = channel.new_nonce()
        base, gpu_env = dict(os.environ), None
        if slot is not None and self.gpu_slots is not None:
            base, gpu_env = strip_device_vars(base), self.gpu_slots.env(slot, scratch)
        env = scrubbed_env(base, home=str(scratch), threads=limits.threads,
                           extra={**toolchain_env(base, str(scratch))[0], **(gpu_env or {})},
                           secret_vars=self.secret_vars)
        spec_fd = channel.spec_pipe(spec, nonce)
        res_r, res_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *channel.command(iso.prefix, self.python, spec_fd, res_w), cwd=str(scratch), env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, pass_fds=(spec_fd, res_w))
        except OSError as exc:
            os.close(res_r)
            return EvalResult(ok=False, reason=f"cannot start the evaluator process: {exc}", duration_s=time.monotonic() - t0)
        finally:
            os.close(spec_fd)
            os.close(res_w)
        reader, transport = await _pipe_reader(res_r)
        report_task = asyncio.ensure_future(_read_reports(reader, nonce, on_stage))
        out_task = asyncio.ensure_future(_drain(proc.stdout, limits.stdout_cap, "head"))
        err_task = asyncio.ensure_future(_drain(proc.stderr, limits.stderr_cap, "tail"))
        backstop = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), limits.wall_s + GRACE_S)
            except asyncio.TimeoutError:
                backstop = True
            finally:
                await self._stop(proc, group, uid)
            done, _ = await asyncio.wait({out_task, err_task, report_task}, timeout=5.0)
        finally:
            # Also on cancellation: no reader task or pipe outlives the evaluation.
            for task in (out_task, err_task, report_task):
                if not task.done():
                    task.cancel()
            transport.close()
        (out, out_total) = out_task.result() if out_task in done else (b"", 0)
        (err, err_total) = err_task.result() if err_task in done else (b"", 0)
        raw = report_task.result()[0] if report_task in done else b""
        res = EvalResult(ok=False, duration_s=time.monotonic() - t0, exit_code=proc.returncode, timed_out=backstop)
        res.stdout_head = out.decode("utf-8", "replace")
        res.stderr_tail = err.decode("utf-8", "replace")[-TAIL_CHARS:]
        if out_total > limits.stdout_cap:
            res.warnings.append(f"stdout truncated: {out_total} bytes, kept the first {limits.stdout_cap}")
        if err_total > limits.stderr_cap:
            res.warnings.append(f"stderr truncated: {err_total} bytes, kept the last {limits.stderr_cap}")
        if backstop:
            res.reason = f"timeout: killed after {limits.wall_s:g} s wall clock (the supervisor did not stop it)"
            return res
        report, why = channel.parse_report(raw, nonce)
        if report is None:
            res.reason = f"{why} (runner exit code {proc.returncode})"
            return res
        return _apply(res, report, limits, cpu_s)

    def _readable(self, evaluator: Path, limits: SandboxLimits) -> list[str] | None:
        """Read confinement needs Landlock; without it reads stay as the mode leaves them."""
        if not self.isolation.landlock:
            return None
        key = (evaluator.parent, limits.read_paths)
        if key not in self._readable_paths:
            # Once per task folder and declared paths: listing /etc and probing every toolchain
            # home on each evaluation would be the same answer every time.
            tools = toolchain_env(dict(os.environ), "")[1]
            self._readable_paths[key] = readable_paths(self.python, evaluator.parent, SUPPORT_DIR,
                                                       (*limits.read_paths, *tools))
        return self._readable_paths[key]

    async def _stop(self, proc: asyncio.subprocess.Process, group: PidsGroup, uid: int | None) -> None:
        """Normal exit: sweep strays. Backstop or cancellation: let the supervisor clean up, then kill."""
        if proc.returncode is None:
            try:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(asyncio.shield(proc.wait()), 6.0)
            except (asyncio.TimeoutError, ProcessLookupError):
                pass  # the supervisor is stuck or gone: the kills below do it
        _kill_group(proc.pid)
        group.kill_all()
        if uid is not None:
            uids.kill_uid(uid)
        if proc.returncode is None:
            await asyncio.shield(proc.wait())


def _apply(res: EvalResult, report: dict, limits: SandboxLimits, cpu_s: int) -> EvalResult:
    if report.get("setup_error"):
        res.reason = f"sandbox setup failed: {report['setup_error']}"
        return res
    if report.get("cleanup_error"):
        res.warnings.append(f"sandbox cleanup: {report['cleanup_error']}")
    res.exit_code = report.get("exit_code")
    if report.get("timed_out"):
        res.timed_out = True
        res.reason = f"timeout: killed after {limits.wall_s:g} s wall clock"
        return res
    if report.get("killed"):
        res.warnings.append(f"killed {report['killed']} process(es) the evaluation left running")
    sig = report.get("exit_signal")
    if sig:
        res.exit_code = -int(sig)
        res.reason = signal_reason(int(sig), limits.fsize_mb, cpu_s)
        return res
    rc = res.exit_code
    if report.get("result") is None:
        res.reason = f"the evaluation exited with code {rc} without writing a result (os._exit, crash or killed)"
        return res
    return interpret(res, report["result"])
