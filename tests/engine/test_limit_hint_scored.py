"""An evaluator that catches its candidate's crash and scores it 0 still learns which sandbox
limit broke it (issue 35 census: OpenEvolve's sums_diffs_finite_sets scored 0.0 with "the
candidate's process ended (exit code -6)" while JAX's LLVM aborted at the 2 GiB address-space
limit; nothing named [program] eval_memory_mb)."""

from __future__ import annotations

from engine.sandbox import EvalResult, SandboxLimits
from engine.sandbox.limit_hints import with_hint

LIMITS = SandboxLimits(memory_mb=2048)


def test_an_llvm_abort_in_stderr_of_a_scored_run_names_eval_memory_mb() -> None:
    res = with_hint(EvalResult(ok=True, score=0.0, stderr_tail="LLVM ERROR: Unable to allocate section memory!",
                               feedback={"error": "the candidate's process ended (exit code -6)"}), LIMITS)
    assert res.ok and res.score == 0.0
    assert any("eval_memory_mb = 2048" in w for w in res.warnings), res.warnings


def test_a_killed_candidate_process_names_the_memory_and_cpu_limits() -> None:
    res = with_hint(EvalResult(ok=True, score=0.0, feedback={"error": "the candidate's process ended (exit code -9)"}),
                    LIMITS)
    assert any("eval_memory_mb" in w and "eval_timeout_s" in w for w in res.warnings), res.warnings


def test_a_clean_scored_run_gets_no_warning() -> None:
    res = with_hint(EvalResult(ok=True, score=0.5, stderr_tail="progress 10%\n", feedback={"note": "fine"}), LIMITS)
    assert res.warnings == []
    aborted = with_hint(EvalResult(ok=True, score=0.0, feedback={"error": "the candidate's process ended (exit code -6)"}),
                        LIMITS)
    assert aborted.warnings == []  # an abort alone is not a limit's doing
