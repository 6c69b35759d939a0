"""LoongFlow's executor variants (§4.1.2 "Polymorphic Execution Strategies"), as a strategy's
setting the program kind's propose stage follows (engine/stages/executor_fix.py runs the loop).

- **chat**: a single-pass coder: the kind's proposal with its patch retries, nothing more.
- **react**: after a patch applies, the candidate is checked locally (it must parse and compile,
  its imports must be findable: engine/code/local_checks.py; nothing is executed) and, while it
  fails, the executor is shown the errors and asked again, at most `fix_rounds` times (the
  paper's Local Verification Loop: "self-correct minor errors (such as syntax typos or import
  errors) immediately"). The paper gives no bound; 2 is the released code's `react_max_steps`.
- **fuse**: as the released code's fuse executor: chat while the parent scores below
  `fuse_threshold` (0.9 there, on the task's own score scale), react from it on, where a cheap
  mistake would waste a strong parent.

Each repair call is an LLM call of stage REPAIR_STAGE; its round, the errors it was shown and
what came of it are recorded on the item (payload / artifact meta `executor_fix`).
"""

from __future__ import annotations

from dataclasses import dataclass

VARIANTS = ("chat", "react", "fuse")
REPAIR_STAGE = "execute_fix"
FIX_HEADING = "## Patch errors"
"""The repair request's heading: a retry of the proposal, as the kind's patch retries are
(the simulated model recognises a retry by it)."""


@dataclass(frozen=True)
class ExecutorSpec:
    variant: str = "react"
    fix_rounds: int = 2
    fuse_threshold: float = 0.9

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"executor must be one of {', '.join(VARIANTS)}, not {self.variant!r}")
        if self.fix_rounds < 0:
            raise ValueError("executor_fix_rounds must be >= 0")

    def rounds_for(self, parent_score: float) -> int:
        """Repair calls this proposal may make (0: no local checks at all)."""
        if self.variant == "chat":
            return 0
        if self.variant == "fuse" and parent_score < self.fuse_threshold:
            return 0
        return self.fix_rounds

    def mode_for(self, parent_score: float) -> str:
        """The variant that works on this proposal (fuse resolves to chat or react)."""
        if self.variant != "fuse":
            return self.variant
        return "react" if parent_score >= self.fuse_threshold else "chat"


def fix_request(errors: list[str], fmt: str) -> str:
    """The user turn that asks for a repaired patch after the candidate failed the local checks."""
    listed = "\n".join(f"- {e[:600]}" for e in errors[:8])
    ask = {"diff": "SEARCH/REPLACE blocks", "full": "the complete program", "udiff": "a unified diff"}.get(fmt, "a patch")
    return (f"{FIX_HEADING}\nYour patch applied, but the program it produces fails the local checks run "
            f"before evaluation:\n{listed}\nFix these errors: answer again with {ask} against the current "
            "program shown above, keeping the intended change.")
