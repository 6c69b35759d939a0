"""Which sandbox limit stopped an evaluation, and which setting raises it.

An evaluation killed by a limit usually dies with a message that names neither: JAX's "LLVM
ERROR: Unable to allocate section memory", a bare SIGKILL, "can't start new thread". The hint
is appended to the failure reason the proposer, the TUI and the summary show.
"""

from __future__ import annotations

import re
import signal
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.sandbox.core import SandboxLimits
    from engine.sandbox.results import EvalResult

_MEMORY = re.compile(r"MemoryError|out of memory|Cannot allocate memory|Unable to allocate|std::bad_alloc|"
                     r"failed to (?:map|allocate)|mmap\(\) failed|RESOURCE_EXHAUSTED|(?-i:\bOOM\b)", re.I)
_PROCESSES = re.compile(r"can't start new thread|Resource temporarily unavailable|fork: retry|"
                        r"pthread_create failed|BlockingIOError: \[Errno 11\]", re.I)


def limit_hint(res: EvalResult, limits: SandboxLimits) -> str:
    """"" when no limit explains the failure, else one clause naming the limit and its key."""
    text = f"{res.reason}\n{res.stderr_tail}"
    memory = (f"the address-space limit is [program] eval_memory_mb = {limits.memory_mb} (JAX/XLA, CUDA and "
              "PyTorch reserve large address ranges: raise it, e.g. 16384)")
    if res.timed_out:
        return (f"raise [program] eval_timeout_s (now {limits.wall_s:g}; OpenEvolve's evaluator.timeout maps "
                "to it)")
    if res.exit_code == -signal.SIGXCPU:
        return f"the CPU limit follows [program] eval_timeout_s (now {limits.wall_s:g} s): raise it"
    if res.exit_code == -signal.SIGXFSZ:
        return f"raise [program] eval_fsize_mb (now {limits.fsize_mb})"
    if _MEMORY.search(text):
        return memory
    if _PROCESSES.search(text):
        return f"processes and threads are capped by [program] eval_nproc = {limits.nproc}: raise it"
    if res.exit_code == -signal.SIGKILL:
        return f"{memory}; or the CPU limit, which follows [program] eval_timeout_s"
    return ""


_CANDIDATE_KILLED = re.compile(r"candidate's process ended \(exit code -9\)")


def with_hint(res: EvalResult, limits: SandboxLimits) -> EvalResult:
    if not res.ok:
        hint = limit_hint(res, limits)
        if hint and hint not in res.reason:
            res.reason = f"{res.reason}; {hint}"
    elif _MEMORY.search(res.stderr_tail) or any(_CANDIDATE_KILLED.search(v) for v in res.feedback.values()):
        # The evaluator caught the failure and scored it (often 0): the score stands, and a
        # warning in the feedback names the limit that explains it (JAX's LLVM abort at 2 GiB).
        said = "; ".join(res.feedback.values())
        seen = replace(res, ok=False, reason=said, timed_out=False, warnings=[],
                       exit_code=-signal.SIGKILL if _CANDIDATE_KILLED.search(said) else None)
        hint = limit_hint(seen, limits)
        if hint:
            res.warnings.append(f"the evaluator scored a run that a sandbox limit broke: {hint}")
    return res
