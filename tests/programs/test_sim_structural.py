"""The simulated proposer makes structural edits, so a program with no constants still evolves
offline (issue 19 item 5): reorderings and operator flips that apply and parse."""

from __future__ import annotations

import random

from engine.code.evolve_blocks import check_syntax
from engine.code.patches import apply_reply
from engine.llm.sim.program_model import propose

NO_CONSTANTS = '''\
def order(items, key):
    # EVOLVE-BLOCK-START
    best = items
    total = len(items)
    ranked = sorted(best, key=key)
    if total < len(ranked):
        ranked = ranked + best
    chosen = min(ranked, key=key)
    # EVOLVE-BLOCK-END
    return ranked, chosen
'''


STRUCTURAL = {"Reorder two statements.", "Change the logic of one step."}


def _request(code: str, fmt: str = "diff") -> list[dict]:
    return [{"role": "system", "content": f"You improve programs.\nevotui-patch-format: {fmt}"},
            {"role": "user", "content": f"## Current program (score 0.5)\n```python\n{code}```\n"}]


def test_a_program_without_constants_gets_valid_structural_edits() -> None:
    rng = random.Random(3)
    children, reasons = set(), set()
    for _ in range(60):
        reply = propose(_request(NO_CONSTANTS), str, rng)
        res = apply_reply(NO_CONSTANTS, reply, "diff")
        reason = reply.splitlines()[0]
        if reason not in STRUCTURAL:
            continue  # the simulator also emits realistic broken patches at a small rate
        assert res.ok and check_syntax(res.text) is None, reply
        children.add(res.text)
        reasons.add(reason)
    assert len(children) >= 5
    assert reasons == STRUCTURAL


def test_full_rewrites_carry_structural_edits_too() -> None:
    rng = random.Random(5)
    reply = propose(_request(NO_CONSTANTS, "full"), str, rng)
    res = apply_reply(NO_CONSTANTS, reply, "full")
    assert res.ok and res.text != NO_CONSTANTS and check_syntax(res.text) is None
