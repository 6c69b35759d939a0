"""The simulator's replies are pinned: the same request and seed give the same reply.

The simulator is calibrated (the bench's ratios and scores rest on it), so a refactoring of it
must not change a single reply. The corpus is built by the engine's own message builders for the
rules task (rollouts under several prompts, proposals with real feedback, stale-proposal
reflections), plus a program proposal and generic requests. tests/fixtures/sim_replies.json holds
each request with the reply the simulator gave when the corpus was recorded; the requests are
stored too, so the check does not depend on today's prompt layouts (the last test checks those
still reach the rules plug-in).

Regenerate only for an intended change of the simulated model (then re-check the bench):
    python tests/engine/test_sim_replies.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from engine.llm.sim.answer import answer
from engine.stages import program_prompt, reflection
from engine.tasks.prompt_task import load_task
from engine.tasks.ruleworld import RULES, prompt_status
from engine.tasks.sim_behaviours import all_behaviours

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sim_replies.json"
PROGRAM = """import math

# EVOLVE-BLOCK-START
def solve(n):
    step = 0.25
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += step * math.sqrt(i + 1)
    return total
# EVOLVE-BLOCK-END
"""


def _reply(messages: list[dict], stage: str, seed: int) -> str:
    return answer(messages, stage, random.Random(seed), behaviours=all_behaviours())


def _prompts(seed_prompt: str) -> list[str]:
    right = [r.statement for r in RULES]
    return [
        seed_prompt,
        "\n".join([seed_prompt, *right]),
        "\n".join([seed_prompt, *right[:4]]),
        "\n".join([seed_prompt, RULES[0].wrong, RULES[1].wrong, right[2], *RULES[3].paraphrases[:1]]),
    ]


def build_corpus() -> list[dict]:
    """Requests (messages, stage, seed) from the engine's builders; replies are filled by the caller."""
    task = load_task("rules")
    corpus: list[dict] = []

    def add(messages: list[dict], stage: str) -> str:
        corpus.append({"stage": stage, "seed": len(corpus), "messages": messages})
        return _reply(messages, stage, corpus[-1]["seed"])

    prompts = _prompts(task.seed_prompt.strip())
    for p, prompt in enumerate(prompts):
        traces = []
        for k, ex in enumerate(task.train[p * 5: p * 5 + 5]):
            user = task.user_message(ex)
            out = add([{"role": "system", "content": prompt}, {"role": "user", "content": user}],
                      ("rollout", "evaluate")[k % 2])
            res = task.score(ex, out)
            traces.append({"input": user, "output": out, "score": res.score, "feedback": res.feedback})
        for stage in ("propose", "default"):
            add(reflection.build_messages(task.description, prompt, traces[:3]), stage)
    best, seed = prompts[2], prompts[0]
    children = [prompts[1], f"{seed}\n{RULES[0].wrong}", f"{seed}\n{RULES[1].statement}",
                f"{seed}\nBe careful.", prompts[3]]
    for child in children:
        changes = [(3, "c3", 0.41, seed, best)]
        add(reflection.build_reflect_messages(best, seed, child, 1, 3, changes), "reflect")
    for fmt in ("diff", "full"):
        add(program_prompt.build_messages(
            system=program_prompt.system_message("", fmt), description="Maximise solve(100).", parent_id="p1",
            parent_code=PROGRAM, parent_score=1.5, metrics={"combined_score": 1.5}, feedback={},
            last_change="", others=[("p0", 1.2, PROGRAM.replace("0.25", "0.2"))], failures=[], fmt=fmt,
            max_chars=20000), "propose")
    code = "Improve this:\n```python\ndef f():\n    return 1\n```"
    for messages, stage in (
        ([{"role": "user", "content": "What is 2+2?"}], "rollout"),
        ([{"role": "user", "content": [{"type": "text", "text": "hello"}]}], "default"),
        ([{"role": "user", "content": code}], "propose"),
        ([{"role": "user", "content": "```\nx\n```\nFeedback: too long"}], "default"),
        ([{"role": "user", "content": "## Current instructions\n```\nx\n```"}], "reflect"),
        ([{"role": "user", "content": task.user_message(task.val[0])}], "propose"),
        ([{"role": "user", "content": task.user_message(task.val[1])}], "custom-stage"),
    ):
        add(messages, stage)
    return corpus


def test_replies_are_unchanged() -> None:
    recorded = json.loads(FIXTURE.read_text())
    changed = [(k, r["stage"]) for k, r in enumerate(recorded)
               if _reply(r["messages"], r["stage"], r["seed"]) != r["reply"]]
    assert len(recorded) >= 40 and changed == []


def test_corpus_covers_every_kind_of_answer() -> None:
    replies = [r["reply"] for r in json.loads(FIXTURE.read_text())]
    assert sum(r.startswith("Reasoning: from ") for r in replies) >= 4        # rules reflector
    assert any("VERDICT: patch" in r for r in replies) and any("VERDICT: discard" in r for r in replies)
    assert any("<<<<<<< SEARCH" in r for r in replies)                        # program patches
    assert any("tightened the wording" in r for r in replies)                 # generic rework
    assert sum("formatting rule(s) that apply here" in r for r in replies) >= 20  # task model


def test_todays_layouts_reach_the_rules_plugin() -> None:
    """The engine's current builders still produce requests the rules plug-in answers."""
    corpus = build_corpus()
    by_stage = {}
    for r in corpus:
        by_stage.setdefault(r["stage"], []).append(_reply(r["messages"], r["stage"], r["seed"]))
    assert all("formatting rule(s)" in t for t in by_stage["rollout"][:10] + by_stage["evaluate"][:10])
    assert sum(t.startswith("Reasoning: from ") for t in by_stage["propose"]) >= 4
    assert all(t.startswith("VERDICT:") for t in by_stage["reflect"])
    assert prompt_status(_prompts("x")[1]) and all(v == "right" for v in prompt_status(_prompts("x")[1]).values())


if __name__ == "__main__":
    corpus = build_corpus()
    for r in corpus:
        r["reply"] = _reply(r["messages"], r["stage"], r["seed"])
    FIXTURE.write_text(json.dumps(corpus, indent=1) + "\n")
    print(f"wrote {len(corpus)} requests to {FIXTURE}")
