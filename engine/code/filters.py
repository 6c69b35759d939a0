"""Cheap filters that run before any evaluation, each counted.

no_op: the child equals the parent (ignoring trailing whitespace); duplicate: a program with
the same normalised hash is already in the pool or in flight; syntax: ``ast.parse`` rejects it
(Python, tree-sitter positions as a hint) or the language's tree-sitter grammar finds an error the
parent does not have (a grammar gap the parent shares is left to the evaluator); region: code
outside the EVOLVE-BLOCK changed; cycling: the child re-adds lines deleted earlier in its lineage
(engine/code/cycling.py, only with [program] cycling_guard = "reject"). The guard's other
settings count their children in the same Counter as NOTES (noted, not turned away).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.code.evolve_blocks import check_syntax
from engine.code.languages import PYTHON, LanguageSpec
from engine.code.patches import check_outside

KINDS = ("no_op", "length", "duplicate", "syntax", "region", "cycling")
NOTES = ("cycling_warned", "cycling_penalised")


def normalise(text: str) -> str:
    """Program text for comparison: trailing whitespace and trailing blank lines ignored."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def program_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Verdict:
    kind: str | None
    """None = passed; otherwise one of KINDS."""
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.kind is None


@dataclass
class ProgramFilters:
    """Filter state of a run: known hashes and per-kind counters."""

    known: set[str] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)
    """Rejections by kind. A run passes its stored counter (``counts=ctx.program.filter_counts``)
    so the counts are saved with the run state and survive a resume; by default a private one."""
    passed: int = 0
    max_length: int | None = None
    """Longest program in characters (OpenEvolve's max_code_length); None = no limit."""
    language: LanguageSpec = PYTHON
    """The candidate's language: markers and syntax pre-check."""

    def remember(self, text: str) -> str:
        digest = program_hash(text)
        self.known.add(digest)
        return digest

    def check(self, parent: str, child: str, extra: Callable[[], Verdict] | None = None) -> Verdict:
        """Run every filter in order of cost; the first that fails is counted and returned.
        extra: a costlier check run last (the cycling guard's lineage check)."""
        verdict = self._verdict(parent, child)
        if verdict.passed and extra is not None:
            verdict = extra()
        if verdict.kind is None:
            self.passed += 1
        else:
            self.counts[verdict.kind] += 1
        return verdict

    def _verdict(self, parent: str, child: str) -> Verdict:
        if normalise(parent) == normalise(child):
            return Verdict("no_op", "no-op: the patch leaves the program unchanged")
        if self.max_length is not None and len(child) > self.max_length:
            return Verdict("length", f"length: {len(child)} characters, over the limit of {self.max_length}")
        if program_hash(child) in self.known:
            return Verdict("duplicate", "duplicate: this exact program is already in the pool or being evaluated")
        violation = check_outside(parent, child, self.language)
        if violation:
            return Verdict("region", f"region: {violation}")
        problem = check_syntax(child, self.language)
        # A tree-sitter grammar may lag its language: an error the parent has too is the grammar's gap.
        if problem is not None and (self.language.ast_verdict or check_syntax(parent, self.language) is None):
            return Verdict("syntax", f"syntax: {problem}")
        return Verdict(None)
