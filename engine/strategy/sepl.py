"""sepl: Autogenesis's Self-Evolution Protocol Layer (seeds/autogenesis.txt) as a strategy.

Reflect -> Select -> Improve -> Evaluate -> Commit over an agent's named components:

- Reflect: the parent's traces on a minibatch (scores and the metric's feedback) are the evidence.
- Select: which component to change. `sepl` blames: the evolvable component the failing traces'
  feedback names most (a name counts as a whole word; "component NAME" or "[NAME]" counts twice);
  when none is named, or on a tie that includes it, the round-robin turn. `sepl-rr` takes the
  round-robin turn, as GEPA does.
- Improve: the kind's reflective rewrite of that one component (the others are read-only context).
- Evaluate: the minibatch gate against the parent, then full validation.
- Commit: the ledger commits the child (a new version of the component); a refused one is kept
  in the audit trail with the reason.

Every transition writes an audit row (schema v6; engine/stages/audit.py), read with
`evotui audit RUN`. Parents come from the Pareto front as in gepa; no merges (a merge is no
audited proposal of one component).
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from engine.strategy.parts import ParentGate, ParentOnly, ParetoSelector
from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import register

SUMMARY = "SEPL (Autogenesis): reflect, select the component the feedback blames, improve, evaluate, commit; audited"
SUMMARY_RR = "SEPL with GEPA's round-robin component selection instead of blame; audited"


def _mentions(name: str, text: str) -> int:
    """How strongly `text` names component `name`: explicit ("component NAME", "[NAME]") 2, a bare
    word 1, else 0."""
    esc = re.escape(name)
    if re.search(rf"(component\s+{esc}|\[{esc}\])(?![A-Za-z0-9_.-])", text, re.I):
        return 2
    return 1 if re.search(rf"(?<![A-Za-z0-9_.-]){esc}(?![A-Za-z0-9_.-])", text) else 0


def blame(names: Sequence[str], traces: Sequence[Mapping], turn: str) -> tuple[str, str]:
    """(component, why): the evolvable component the failing traces' feedback implicates most."""
    if not traces:
        return turn, "no traces; round robin"
    top = max(float(t.get("score", 0.0)) for t in traces)
    failing = [t for t in traces if float(t.get("score", 0.0)) < top] or list(traces)
    weight = {n: sum(_mentions(n, str(t.get("feedback") or "")) for t in failing) for n in names}
    best = max(weight.values(), default=0)
    if best == 0:
        return turn, f"no component named in the feedback of {len(failing)} trace(s); round robin"
    tied = [n for n in names if weight[n] == best]
    chosen = turn if turn in tied else tied[0]
    shown = ", ".join(f"{n} {w}" for n, w in sorted(weight.items(), key=lambda kv: -kv[1]) if w)
    return chosen, f"blame: named in the feedback of {len(failing)} trace(s) (weights {shown})"


def round_robin(names: Sequence[str], traces: Sequence[Mapping], turn: str) -> tuple[str, str]:
    return turn, "round robin (GEPA)"


def _sepl(name: str, summary: str, choice) -> Strategy:
    return Strategy(name=name, summary=summary, selector=ParetoSelector(), context=ParentOnly(),
                    acceptance=ParentGate(), merges=False, component_choice=choice, audited=True)


@register("sepl", SUMMARY)
def sepl(params: SearchParams) -> Strategy:
    return _sepl("sepl", SUMMARY, blame)


@register("sepl-rr", SUMMARY_RR)
def sepl_rr(params: SearchParams) -> Strategy:
    return _sepl("sepl-rr", SUMMARY_RR, round_robin)
