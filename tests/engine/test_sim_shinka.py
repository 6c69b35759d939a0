"""The simulator answers ShinkaEvolve's unchanged templates (issue 35 item 1).

Requests are built from Shinka's literal templates (tests/fixtures/shinka_templates/, copied from
shinka-evolve 0.0.7) the way its ``PromptSampler`` assembles them (system = task message + format
section; user = prior programs + "\\n" + the iteration message, plus the crossover component), and
replies are read with Shinka's own formats: its SEARCH/REPLACE pattern inside ``<DIFF>``, its
``extract_between`` of the first language fence for a full rewrite, NOVEL/NOT_NOVEL by prefix, a
numbered list of recommendations. "Same distribution of edits" is checked the strictest way: for
the same parent, other program and seed, Shinka's layout gets the edit evotui's layout gets.
A last test applies replies with the installed Shinka's own parsers and is skipped without it.
"""

from __future__ import annotations

import ast
import importlib.util
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.llm.sim.answer import answer, length_stage, read_request
from engine.stages import program_prompt
from engine.tasks.sim_behaviours import all_behaviours
from tests.engine.test_sim_replies import PROGRAM

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "shinka_templates" / "shinka_prompts.py"
_spec = importlib.util.spec_from_file_location("shinka_prompts_fixture", FIXTURE)
SP = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SP)

OTHER = PROGRAM.replace("0.25", "0.2")
SINE = "# EVOLVE-BLOCK-START\ndef approximate(x: float) -> float:\n    return x\n\n\n# EVOLVE-BLOCK-END\n"
TASK_SYS = ("You are an expert optimization and algorithm design assistant. "
            "Improve the program while preserving correctness and immutable regions.")
# shinka/edit/apply_diff.py PATCH_PATTERN (Apache-2.0), and its extract_between for a fence.
PATCH_PATTERN = re.compile(r"<{7}\s*SEARCH\s*\n(.*?)\n\s*={7}\s*\n(.*?)\n\s*>{7}\s*REPLACE\s*", re.DOTALL)


def _between(text: str, start: str, end: str) -> str | None:
    m = re.search(f"{start}\\s*(.*?)\\s*{end}", text, re.DOTALL)
    return m.group(1).strip() if m else None


def _prog(code: str, score: float = 0.5, correct: bool = True):
    return SimpleNamespace(code=code, combined_score=score, public_metrics={"score": score},
                           text_feedback="", correct=correct, metadata={})


def shinka_messages(kind: str, parent: str = PROGRAM, other: str = OTHER, variant: int = 0,
                    prior: bool = True) -> list[dict]:
    """Messages as shinka.core.sampler.PromptSampler.sample / sample_fix builds them; ``other``
    shown as a prior program (``prior``) and, for a crossover, as the second parent."""
    perf = SP.perf_str(0.5, {"score": 0.5})
    history = SP.construct_eval_history_msg([_prog(other, 0.4)], language="python") if prior else ""
    if kind == "fix":
        system = TASK_SYS + SP.FIX_SYS_FORMAT.format(language="python")
        errors = SP.format_error_output_section(stderr_log="ValueError: bad radius")
        user = SP.FIX_ITER_MSG.format(language="python", code_content=parent, text_feedback_section="",
                                      error_output_section=errors)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    system = TASK_SYS + {"diff": SP.DIFF_SYS_FORMAT, "full": SP.FULL_SYS_FORMATS[variant],
                         "cross": SP.CROSS_SYS_FORMAT}[kind]
    template = {"diff": SP.DIFF_ITER_MSG, "full": SP.FULL_ITER_MSG, "cross": SP.CROSS_ITER_MSG}[kind]
    user = history + "\n" + template.format(language="python", code_content=parent, performance_metrics=perf,
                                             text_feedback_section="")
    if kind == "cross":
        user += "\n\n" + SP.get_cross_component([_prog(other, 0.4)], [], language="python")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _own(fmt: str, parent: str = PROGRAM, other: str = OTHER) -> list[dict]:
    return program_prompt.build_messages(
        system=program_prompt.system_message("", fmt), description="", parent_id="p1", parent_code=parent,
        parent_score=0.5, metrics={}, feedback={}, last_change="", others=[("p0", 0.4, other)], failures=[],
        fmt=fmt, max_chars=20000)


def _reply(messages: list[dict], seed: int, stage: str = "default") -> str:
    return answer(messages, stage, random.Random(seed), behaviours=all_behaviours())


def _apply(code: str, diff_body: str) -> tuple[str, int]:
    """Shinka's apply_search_replace for exactly matching blocks (its tolerant re-indentation aside)."""
    applied = 0
    for search, replace in PATCH_PATTERN.findall(diff_body):
        if search in code:
            code, applied = code.replace(search, replace, 1), applied + 1
    return code, applied


def _compiles(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def test_the_fixture_is_shinkas_wording() -> None:
    """The copied templates are the ones whose layout the simulator reads (spot checks)."""
    assert "<DIFF>\n<<<<<<< SEARCH" in SP.DIFF_SYS_FORMAT and SP.DIFF_ITER_MSG.startswith("# Current program\n\nHere is")
    assert len(SP.FULL_SYS_FORMATS) == 5 and all("<CODE>\n```{language}" in f for f in SP.FULL_SYS_FORMATS)
    assert "Respond with NOVEL or NOT_NOVEL" in SP.NOVELTY_USER_MSG


def test_diff_prompt_gets_evotuis_edit_in_shinkas_tags() -> None:
    msgs = shinka_messages("diff")
    assert read_request(msgs, "default").kind == "patch"  # Shinka sends no stage header
    assert length_stage(msgs, "default") == "propose"     # so it costs what any proposal costs
    applied = 0
    for seed in range(40):
        reply = _reply(msgs, seed)
        own = _reply(_own("diff"), seed, "propose")
        reason, _, own_blocks = own.partition("\n")
        assert re.fullmatch(r"[a-z_]+", _between(reply, "<NAME>", "</NAME>")), reply
        assert _between(reply, "<DESCRIPTION>", "</DESCRIPTION>") == reason
        body = _between(reply, "<DIFF>", "</DIFF>")
        assert body == own_blocks.strip()  # same edit model, same draws
        new, n = _apply(PROGRAM, body)
        applied += n > 0 and new != PROGRAM and _compiles(new)
    # misses are the edit model's own failure rates (malformed, not found, syntax, re-indented)
    assert 24 <= applied < 40


@pytest.mark.parametrize("variant", range(5))
def test_every_full_rewrite_variant_gets_a_whole_program(variant: int) -> None:
    msgs = shinka_messages("full", variant=variant)
    assert read_request(msgs, "default").kind == "patch"
    changed = 0
    for seed in range(15):
        reply = _reply(msgs, seed)
        code = _between(reply, "```python", "```")  # shinka apply_full_patch's extraction
        assert code is not None and "<<<<<<< SEARCH" not in reply and _between(reply, "<CODE>", "</CODE>")
        assert code == _between(_reply(_own("full"), seed, "propose"), "```python", "```")
        assert _compiles(code) and "EVOLVE-BLOCK-START" in code and "EVOLVE-BLOCK-END" in code
        changed += code != PROGRAM.strip()
    assert changed >= 13


def test_crossover_borrows_from_the_second_parent_as_any_layout_does() -> None:
    msgs = shinka_messages("cross", prior=False)  # no prior programs: only the crossover parent
    assert "# Crossover Inspiration Programs" in msgs[1]["content"]
    borrowed = 0
    for seed in range(60):
        reply = _reply(msgs, seed)
        code = _between(reply, "```python", "```")
        assert code == _between(_reply(_own("full"), seed, "propose"), "```python", "```")
        borrowed += "step = 0.2\n" in code
    assert borrowed >= 5  # P_BORROW = 0.25 of proposals take a line from a shown program


def test_fix_prompt_gets_a_whole_program() -> None:
    msgs = shinka_messages("fix")
    assert read_request(msgs, "default").kind == "patch"
    for seed in range(10):
        code = _between(_reply(msgs, seed), "```python", "```")
        assert code is not None and _compiles(code) and "def solve(n):" in code
        assert "ValueError" not in code  # the error log's fence is not taken for a program


def test_a_retry_after_a_failed_edit_is_read_as_one() -> None:
    first = shinka_messages("diff")
    reply = _reply(first, 0)
    retry = first + [{"role": "assistant", "content": reply},
                     {"role": "user", "content": "The previous edit was not successful. Error: SEARCH text not "
                                                 "found in editable regions\n\nTry again."}]
    own = _own("diff")
    own_retry = own + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "## Patch errors\nnot found"}]
    assert read_request(retry, "default").kind == "patch"
    for seed in range(30):
        body = _between(_reply(retry, seed), "<DIFF>", "</DIFF>")
        assert body == _reply(own_retry, seed, "propose").partition("\n")[2].strip()


def test_a_program_without_constants_evolves_by_structural_edits() -> None:
    """sine_approx's seed (``return x``): no constant, no statement to swap, no operator to flip."""
    for kind in ("diff", "full"):
        msgs = shinka_messages(kind, parent=SINE, prior=False)
        changed = 0
        for seed in range(30):
            reply = _reply(msgs, seed)
            assert "no constant and no step" not in reply
            if kind == "diff":
                new, n = _apply(SINE, _between(reply, "<DIFF>", "</DIFF>"))
            else:
                new = _between(reply, "```python", "```")
            if new.strip() != SINE.strip() and _compiles(new):
                changed += 1
                namespace: dict = {}
                exec(compile(new, "<sine>", "exec"), namespace)  # the grown program still runs
                assert isinstance(namespace["approximate"](0.5), float)
        assert changed >= 24, kind


def test_novelty_prompt_gets_a_verdict_shinka_reads_by_its_first_word() -> None:
    def verdict(existing: str, proposed: str) -> str:
        user = SP.NOVELTY_USER_MSG.format(language="python", existing_code=existing, proposed_code=proposed)
        reply = _reply([{"role": "system", "content": SP.NOVELTY_SYSTEM_MSG}, {"role": "user", "content": user}], 0)
        assert reply.split()[0] in ("NOVEL", "NOT_NOVEL") and len(reply.splitlines()) >= 2
        return reply.split()[0]

    assert verdict(PROGRAM, OTHER) == "NOVEL"
    assert verdict(PROGRAM, PROGRAM.replace("    total = 0", "    total = 0  # running sum\n")) == "NOT_NOVEL"


def test_meta_prompts_get_replies_in_the_asked_formats() -> None:
    best = SP.construct_individual_program_msg(_prog(PROGRAM, 0.5), language="python")
    step1 = SP.META_STEP1_USER_MSG.replace("{individual_program_msg}", best)
    summary = _reply([{"role": "system", "content": SP.META_STEP1_SYSTEM_MSG}, {"role": "user", "content": step1}], 0)
    assert summary.startswith("**Program Name: solve") and "step = 0.25" in summary
    assert all(f"- **{k}**:" in summary for k in ("Implementation", "Performance", "Feedback"))
    assert "Combined score 0.5000" in summary
    low = _reply([{"role": "user", "content": SP.META_STEP1_USER_MSG.replace(
        "{individual_program_msg}", SP.construct_individual_program_msg(_prog(OTHER, 0.4), language="python"))}], 0)
    summaries = summary + "\n\n" + low
    step2 = (SP.META_STEP2_USER_MSG.replace("{individual_summaries}", summaries)
             .replace("{previous_insights}", "*No previous insights available.*").replace("{best_program_info}", best))
    insights = _reply([{"role": "system", "content": SP.META_STEP2_SYSTEM_MSG}, {"role": "user", "content": step2}], 0)
    for heading in ("Successful Algorithmic Patterns", "Ineffective Approaches", "Implementation Insights",
                    "Performance Analysis"):
        assert f"## {heading}" in insights
    assert "(0.5000)" in insights.split("## Ineffective")[0] and "(0.4000)" in insights.split("## Ineffective")[1]
    step3 = (SP.META_STEP3_USER_MSG.replace("{global_insights}", insights)
             .replace("{previous_recommendations}", "*No previous recommendations available.*")
             .replace("{best_program_info}", best).replace("{max_recommendations}", "3"))
    recs = _reply([{"role": "system", "content": SP.META_STEP3_SYSTEM_MSG}, {"role": "user", "content": step3}], 0)
    numbered = [ln for ln in recs.splitlines() if re.match(r"^\d+\.\s+", ln)]  # shinka's sampling pattern
    assert len(numbered) == 3 and "`step`" in numbered[0]


def test_layouts_without_shinkas_tags_are_answered_as_before() -> None:
    """A current-program heading with prose before its fence but no tagged format stays a task."""
    user = "# Current program\n\nHere it is:\n\n```python\nx = 1\n```\n"
    assert read_request([{"role": "user", "content": user}], "default").kind == "task"
    assert read_request([{"role": "user", "content": "Reply with <CODE> tags."}], "default").kind == "task"


def test_replies_apply_with_shinkas_own_parsers() -> None:
    apply_diff = pytest.importorskip("shinka.edit.apply_diff", reason="shinka-evolve not installed")
    apply_full = pytest.importorskip("shinka.edit.apply_full")
    applied = {"diff": 0, "full": 0}
    for kind in applied:
        for seed in range(30):
            reply = _reply(shinka_messages(kind), seed)
            fn = apply_diff.apply_diff_patch if kind == "diff" else apply_full.apply_full_patch
            new, n, _, error, _, _ = fn(patch_str=reply, original_str=PROGRAM, language="python", verbose=False)
            applied[kind] += error is None and n > 0 and new.strip() != PROGRAM.strip() and _compiles(new)
    # misses: the failure rates, and (full) the edit model's no-op "tune 0 down" (an int floors at 0)
    assert applied["diff"] >= 22 and applied["full"] >= 26, applied
