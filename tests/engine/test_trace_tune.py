"""`evotui tune`'s parts without a run: knobs found with tree-sitter, the PARAMS rewrite (same
program, same result), the ranking answer read in every reasonable format, and the simulator's
knob-ranking plug-in answering in a format the parser reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.llm.sim import answer as sim_answer
from engine.llm.sim import knob_ranker
from engine.llm.sim.plugins import SimRequest
from engine.trace import knobs, tune_rank
from engine.trace.errors import TraceError

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "tasks" / "circle_packing" / "initial_program.py").read_text()

PROGRAM = '''"""Doc."""
import math

N = 26


def f(x, steps=100):
    rate = 0.95
    offset = -0.25
    total = 0.0
    for i in range(50):
        total += x[i % 2] * rate ** i + offset + 1e-3
    return total * 3.5, math.sqrt(2)
'''


def _run(src: str) -> object:
    space: dict = {}
    exec(compile(src, "<p>", "exec"), space)  # noqa: S102 - a fixed test program, not LLM output
    return space["f"]([1.0, 2.0])


def test_knobs_of_a_program_leave_out_shapes_sizes_and_small_integers() -> None:
    found = knobs.find_knobs(PROGRAM)
    names = [k.name for k in found]
    # Named floats first, then the anonymous ones, then integers (steps=100 is a default argument).
    assert names[:3] == ["rate", "offset", "total"] and "steps" in names
    assert not any(k.literal in ("26", "50", "2") for k in found)  # N = 26, range(50), i % 2, sqrt(2)
    off = next(k for k in found if k.name == "offset")
    assert off.default == 0.25 and off.low < 0.25 < off.high  # the minus sign stays in the source
    assert len(knobs.find_knobs(PROGRAM, limit=2)) == 2


def test_rewrite_keeps_the_program_and_moves_values_into_params() -> None:
    found = knobs.find_knobs(PROGRAM)
    out = knobs.rewrite(PROGRAM, found)
    assert out.count("PARAMS[") == len(found) and "PARAMS = {" in out
    assert _run(out) == _run(PROGRAM)
    changed = knobs.rewrite(PROGRAM, found, {k.name: (0.5 if k.name == "rate" else k.default) for k in found})
    assert _run(changed) != _run(PROGRAM)
    assert out.index("PARAMS = {") > out.index("import math")  # after the docstring and imports


def test_circle_packing_seed_knobs_sit_in_the_evolve_block() -> None:
    found = knobs.find_knobs(SEED)
    assert {"spacing_x", "spacing_y", "offset_x", "offset_y", "stagger", "cols"} <= {k.name for k in found}
    assert "n" not in {k.name for k in found} and len(found) <= knobs.MAX_KNOBS
    out = knobs.rewrite(SEED, found)
    start, end = out.index("EVOLVE-BLOCK-START"), out.index("EVOLVE-BLOCK-END")
    assert start < out.index("PARAMS = {") < end


def test_no_knobs_and_other_languages() -> None:
    assert knobs.find_knobs("def f(a):\n    return a[1] + a[0] * 2\n") == []
    with pytest.raises(TraceError):
        knobs.rewrite("x = 1\n", [])
    from engine.code.languages import by_name

    with pytest.raises(TraceError, match="Python candidates only"):
        knobs.find_knobs("fn main() { let x = 0.5; }", by_name("rust"))


@pytest.mark.parametrize("text", [
    '{"hparams": [{"name": "rate", "low": 0.5, "high": 0.999, "scale": "linear"}, {"name": "offset"}]}',
    'Sure:\n```json\n[{"name": "rate", "low": 0.5, "high": 0.999, "scale": "linear"}, "offset", "nope"]\n```',
    "1. rate: 0.5 .. 0.999 (linear)\n2. offset\n3. unknown_knob",
    "- **rate** in [0.5, 0.999], linear scale\n- offset (keep the default range)",
])
def test_ranking_answers_in_any_reasonable_format(text: str) -> None:
    cands = knobs.find_knobs(PROGRAM)
    picked = tune_rank.parse(text, cands)
    assert [p["name"] for p in picked] == ["rate", "offset"]
    chosen = tune_rank.apply(cands, picked)
    rate = chosen[0]
    assert (rate.low, rate.high, rate.log) == (0.5, 0.999, False)
    assert chosen[1] == next(k for k in cands if k.name == "offset")  # no range given: its own


def test_ranking_ranges_that_exclude_the_default_are_ignored() -> None:
    cands = knobs.find_knobs(PROGRAM)
    rate = next(k for k in cands if k.name == "rate")
    chosen = tune_rank.apply(cands, [{"name": "rate", "low": 2, "high": 3}])
    assert chosen == [rate]
    assert tune_rank.parse("I cannot help with that.", cands) == []


def test_the_simulator_answers_the_ranking_prompt_in_formats_the_parser_reads() -> None:
    styles = set()
    for i in range(12):
        src = PROGRAM + f"# variant {i}\n"
        cands = knobs.find_knobs(src)
        msgs = tune_rank.messages(src, cands)
        import random

        text = sim_answer.answer(msgs, "analyze", random.Random(0))
        req = SimRequest(messages=msgs, stage="analyze", kind="task", system=msgs[0]["content"], user=msgs[1]["content"])
        assert knob_ranker.recognises(req) and text == knob_ranker.answer(req)
        styles.add(text.lstrip()[:1])
        picked = tune_rank.parse(text, cands)
        assert picked and [p["name"] for p in picked][:2] == ["rate", "offset"]
        assert all(k.low < k.high for k in tune_rank.apply(cands, picked))
    assert len(styles) == 3  # a JSON object, a fenced list after a sentence, a numbered list


def test_a_tuned_program_tunes_again_under_the_same_names() -> None:
    found = knobs.find_knobs(PROGRAM)
    tuned = knobs.rewrite(PROGRAM, found, {k.name: k.cast(k.default * 1.1) for k in found})
    again = knobs.find_knobs(tuned)
    assert {k.name for k in again} == {k.name for k in found}  # read back from the PARAMS keys
    assert _run(knobs.rewrite(tuned, again)) == _run(tuned)


def test_the_runs_key_variables_are_kept_from_tuning_evaluations() -> None:
    from engine.trace.llm import secret_vars

    cfg = {"task_llm": {"api_key_env": "TASK_KEY"}, "reflection_llm": {"api_key_env": "REFL_KEY"}, "sim": {}}
    assert secret_vars(cfg) == {"TASK_KEY", "REFL_KEY"}
    assert secret_vars({"task_llm": {"api_key_env": None}}) == frozenset()
