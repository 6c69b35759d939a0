"""The simulator answers the peers' unchanged prompts as well as evotui's own (issue 17 item 2).

GEPA: the reflection request is rendered by the installed package's own template
(``InstructionProposalSignature.prompt_renderer``) and the reply parsed by its own
``output_extractor``. OpenEvolve is not a dependency: its request layout is rebuilt below from
its default templates (codelion/openevolve@75bc298, openevolve/prompts/defaults/diff_user.txt,
full_rewrite_user.txt, top_program.txt, system_message.txt; abbreviated to the headings and
instruction lines that matter) and its diff regex and ``apply_diff`` are reimplemented from
openevolve/utils/code_utils.py. "Same quality" is checked the strictest way: with the same seed,
the peer's layout gets the same inferred edit as evotui's layout for the same information.
"""

from __future__ import annotations

import os
import random
import re

import pytest

from engine.llm.sim.answer import answer, read_request
from engine.stages import program_prompt, reflection
from engine.tasks.prompt_task import load_task
from engine.tasks.ruleworld import classify, prompt_status, sentences
from engine.tasks.sim_behaviours import all_behaviours
from tests.engine.test_sim_replies import PROGRAM  # the same program the pinned replies use

OTHER = PROGRAM.replace("0.25", "0.2")


def _gepa():
    if os.environ.get("EVOTUI_REQUIRE_PEERS") == "1":
        from gepa.strategies.instruction_proposal import InstructionProposalSignature
        return InstructionProposalSignature
    sig = pytest.importorskip("gepa.strategies.instruction_proposal",
                              reason="gepa not installed (the `peers` extra); set EVOTUI_REQUIRE_PEERS=1 to require it")
    return sig.InstructionProposalSignature


def _reply(messages: list[dict], stage: str, seed: int) -> str:
    return answer(messages, stage, random.Random(seed), behaviours=all_behaviours())


def _traces() -> tuple[str, list[dict]]:
    """The seed prompt and three scored rollouts of it (the rules task, simulated task model)."""
    task = load_task("rules")
    prompt = task.seed_prompt.strip()
    traces = []
    for k, ex in enumerate(task.train[:3]):
        user = task.user_message(ex)
        out = _reply([{"role": "system", "content": prompt}, {"role": "user", "content": user}], "rollout", k)
        res = task.score(ex, out)
        traces.append({"input": user, "output": out, "score": res.score, "feedback": res.feedback})
    return prompt, traces


def _implied(traces: list[dict]) -> set[str]:
    return {rid for tr in traces for s in sentences(tr["feedback"]) for rid, kind in classify(s) if kind == "right"}


def test_gepa_reflection_gets_evotuis_answer_and_parses() -> None:
    sig = _gepa()
    prompt, traces = _traces()
    implied = _implied(traces)
    assert implied, "the seed prompt's rollouts must fail some rule"
    dataset = [{"Inputs": t["input"], "Generated Outputs": t["output"], "Feedback": t["feedback"]} for t in traces]
    gepa_user = sig.prompt_renderer({"current_instruction_doc": prompt, "dataset_with_feedback": dataset,
                                     "prompt_template": None})
    gepa_msgs = [{"role": "user", "content": gepa_user}]  # GEPA's reflection LM sends the prompt as one user turn
    assert "## Feedback" in gepa_user and "Feedback:" not in gepa_user
    assert read_request(gepa_msgs, "default").kind == "propose"  # GEPA sends no stage header
    own_msgs = reflection.build_messages("", prompt, traces)
    learned = 0
    for seed in range(20):
        reply = _reply(gepa_msgs, "default", seed)
        new = sig.output_extractor(reply)["new_instruction"]
        assert reply.startswith("Reasoning: from 3 feedback line(s)"), reply
        assert new == sig.output_extractor(_reply(own_msgs, "propose", seed))["new_instruction"]
        before, after = prompt_status(prompt), prompt_status(new)
        learned += any(before[r] == "none" and after[r] != "none" for r in implied)
    assert learned >= 12  # the reflector states an implied rule unless it writes vague advice (P_VAGUE)


def test_gepa_feedback_as_a_dict_is_read_under_its_heading() -> None:
    sig = _gepa()
    prompt, traces = _traces()
    dataset = [{"Inputs": t["input"], "Feedback": {"summary": t["feedback"]}} for t in traces]
    user = sig.prompt_renderer({"current_instruction_doc": prompt, "dataset_with_feedback": dataset,
                                "prompt_template": None})
    assert _reply([{"role": "user", "content": user}], "default", 3).startswith("Reasoning: from 3 feedback line(s)")


# --- OpenEvolve (layout from its default templates, see the module docstring) ---------------

OE_SYSTEM = "You are an expert software developer tasked with iteratively improving a codebase."
OE_DIFF_TASK = ("# Task\nSuggest improvements to the program that will improve its FITNESS SCORE.\n\n"
                "You MUST use the exact SEARCH/REPLACE diff format shown below to indicate changes:\n\n"
                "<<<<<<< SEARCH\n# Original code to find and replace (must match exactly)\n=======\n"
                "# New replacement code\n>>>>>>> REPLACE\n\n"
                "IMPORTANT: Do not rewrite the entire program - focus on targeted improvements.")
OE_FULL_TASK = ("# Task\nRewrite the program to improve its FITNESS SCORE.\nProvide the complete new program code.\n\n"
                "```python\n# Your rewritten program here\n```")
# openevolve/utils/code_utils.py: extract_diffs' default pattern (re.DOTALL) and parse_full_rewrite's.
OE_DIFF = re.compile(r"<<<<<<< SEARCH\n(.*?)=======\n(.*?)>>>>>>> REPLACE", re.DOTALL)
OE_FULL = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _openevolve_messages(full: bool) -> list[dict]:
    user = ("# Current Program Information\n- Fitness: 1.5000\n- Feature coordinates: \n- Focus areas: none\n\n"
            "# Program Evolution History\n## Previous Attempts\n\n## Top Performing Programs\n\n"
            f"### Program 1 (Score: 1.2000)\n```python\n{OTHER.rstrip()}\n```\nKey features: step\n\n"
            f"# Current Program\n```python\n{PROGRAM}\n```\n\n" + (OE_FULL_TASK if full else OE_DIFF_TASK))
    return [{"role": "system", "content": OE_SYSTEM}, {"role": "user", "content": user}]


def _oe_apply(code: str, reply: str) -> str:
    """openevolve.utils.code_utils.apply_diff: exact line-sequence match, first occurrence."""
    lines = code.split("\n")
    for search, replace in ((s.rstrip(), r.rstrip()) for s, r in OE_DIFF.findall(reply)):
        s_lines, r_lines = search.split("\n"), replace.split("\n")
        for i in range(len(lines) - len(s_lines) + 1):
            if lines[i: i + len(s_lines)] == s_lines:
                lines[i: i + len(s_lines)] = r_lines
                break
    return "\n".join(lines)


def _own_messages(fmt: str) -> list[dict]:
    return program_prompt.build_messages(
        system=program_prompt.system_message("", fmt), description="", parent_id="p1", parent_code=PROGRAM,
        parent_score=1.5, metrics={}, feedback={}, last_change="", others=[("p0", 1.2, OTHER)], failures=[],
        fmt=fmt, max_chars=20000)


def _compiles(code: str) -> bool:
    try:
        compile(code, "<program>", "exec")
    except SyntaxError:
        return False
    return True


def test_openevolve_diff_prompt_gets_applicable_search_replace() -> None:
    msgs = _openevolve_messages(full=False)
    assert read_request(msgs, "default").kind == "patch"
    applied = 0
    for seed in range(40):
        reply = _reply(msgs, "default", seed)
        assert reply == _reply(_own_messages("diff"), "propose", seed)  # same edit model, same draw
        new = _oe_apply(PROGRAM, reply)
        applied += bool(OE_DIFF.findall(reply)) and new != PROGRAM and _compiles(new)
    # Misses are the edit model's failure rates (malformed, not found, syntax, re-indented blocks,
    # which OpenEvolve's exact matcher does not apply); most proposals apply.
    assert applied >= 24


def test_openevolve_full_rewrite_prompt_gets_a_program() -> None:
    msgs = _openevolve_messages(full=True)
    assert read_request(msgs, "default").kind == "patch"
    changed = 0
    for seed in range(20):
        reply = _reply(msgs, "default", seed)
        assert reply == _reply(_own_messages("full"), "propose", seed)
        code = OE_FULL.findall(reply)[0].strip()
        assert "<<<<<<< SEARCH" not in reply and _compiles(code) and "def solve(n):" in code
        changed += code != PROGRAM.strip()
    assert changed >= 18


def test_plain_requests_are_not_taken_for_peer_layouts() -> None:
    """A task question and a fenced snippet without a current-program heading keep their kinds."""
    assert read_request([{"role": "user", "content": "What is 2+2?"}], "default").kind == "task"
    assert read_request([{"role": "user", "content": "Improve this:\n```python\nx = 1\n```"}], "default").kind == "task"
    assert read_request([{"role": "user", "content": "# Current Program Information\n- Fitness: 1"}], "default").kind == "task"
