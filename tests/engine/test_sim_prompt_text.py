"""The simulated prompt engineer (issue 35, item 6): a prompt evolved as a text file (OpenEvolve's
prompt-optimisation folders, language "text") gets prompt edits that apply, in every patch
format, instead of the program model's operator flips; an OpenEvolve prompt folder loads as a
text candidate evolved whole."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.code.languages import by_name
from engine.code.patches import apply_reply
from engine.llm.sim.program_model import propose
from engine.llm.sim.prompt_text import INSTRUCTIONS
from engine.tasks.loader import load_any_task

PROMPT = "Classify the sentiment of the review as positive or negative.\n"
PROMPT_REASONS = {"Add an instruction the prompt lacks.", "Adopt an instruction from a better prompt.",
                  "Drop an instruction that may distract the model."}


def _request(code: str, fmt: str, others: str = "") -> list[dict]:
    return [{"role": "system", "content": f"You improve prompts.\nevotui-patch-format: {fmt}"},
            {"role": "user", "content": f"## Current program (score 0.5)\n```text\n{code}```\n{others}"}]


@pytest.mark.parametrize("fmt", ["diff", "full", "udiff"])
def test_prompt_edits_apply_in_every_format(fmt: str) -> None:
    rng = random.Random(5)
    children = set()
    for _ in range(40):
        reply = propose(_request(PROMPT, fmt), str, rng)
        if reply.splitlines()[0] not in PROMPT_REASONS:
            continue  # the simulator also emits realistic broken patches at a small rate
        res = apply_reply(PROMPT, reply, fmt, by_name("text"))
        assert res.ok, reply
        assert res.text.startswith(PROMPT.rstrip("\n")), res.text
        children.add(res.text)
    assert len(children) >= 3
    assert all(any(s in child for s in INSTRUCTIONS) for child in children)


def test_an_instruction_already_there_is_not_added_again() -> None:
    full = PROMPT + "\n".join(INSTRUCTIONS) + "\n"
    rng = random.Random(1)
    for _ in range(20):
        reply = propose(_request(full, "full"), str, rng)
        res = apply_reply(full, reply, "full", by_name("text"))
        if res.ok:
            assert all(res.text.count(s) <= 1 for s in INSTRUCTIONS), res.text


def test_an_openevolve_prompt_folder_loads_as_a_text_candidate(tmp_path: Path) -> None:
    folder = tmp_path / "llm_prompt_optimization"
    folder.mkdir()
    (folder / "initial_prompt.txt").write_text(PROMPT)
    (folder / "evaluator.py").write_text("def evaluate(prompt_path):\n    return {'combined_score': 0.1}\n")
    (folder / "config.yaml").write_text('language: "text"\ndiff_based_evolution: false\n')
    task = load_any_task(str(folder))
    assert (task.format, task.language.name, task.program_name) == ("openevolve", "text", "program.txt")
    assert task.initial_program == PROMPT and task.settings.patch_format == "full"
    # Without a config the prompt file alone says it is text.
    (folder / "config.yaml").unlink()
    assert load_any_task(str(folder)).language.name == "text"
