"""Artifacts with named components: rendering, task.toml parsing, proposals (round robin and
"all"), per-component merges, persistence across a stop/resume, diffs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import components as comp
from engine.components import Component
from engine.pool import Artifact
from engine.selection import merge
from engine.stages import reflection
from engine.tasks.prompt_task import TaskError, load_task
from tests.engine.fakes import completion, harness, until  # noqa: F401

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "components_task"
PARTS = (Component("role", "You answer."), Component("format", "One line."), Component("reply", "Only the list.", False))


def art(aid: str, parts, parents=()) -> Artifact:
    return Artifact(aid, comp.render(parts), tuple(parents), 0, {}, components=tuple(parts))


# -- rendering ------------------------------------------------------------------------------------

def test_rendering_round_trips_and_plain_text_is_one_component() -> None:
    text = comp.render(PARTS)
    assert text.splitlines()[0] == "## [role]" and "\n\n## [format]\nOne line.\n\n## [reply]\n" in text
    assert comp.parse_rendering(text, PARTS) == PARTS
    assert comp.parse_rendering(text, PARTS[:2]) is None  # names must match the template
    assert comp.split_rendering("You are a helpful assistant.") is None
    assert comp.from_json(comp.to_json(PARTS)) == PARTS and comp.to_json(None) is None
    one = Artifact("a", "plain", (), 0, {})
    assert one.components is None and one.parts == (Component("text", "plain"),)


def test_component_diff_names_only_changed_components() -> None:
    parent = art("p", PARTS)
    child = art("c", comp.replace(PARTS, {"format": "One line.\nJoin with ' ; '."}))
    diffs = comp.component_diff(parent, child)
    assert [name for name, _ in diffs] == ["format"]
    assert "+Join with ' ; '." in diffs[0][1]
    assert comp.component_diff(Artifact("a", "x", (), 0, {}), Artifact("b", "y", (), 0, {}))[0][0] == "text"
    assert comp.component_diff_texts(parent.text, child.text) == diffs


# -- task.toml ----------------------------------------------------------------------------------------

def test_fixture_task_loads_its_components() -> None:
    task = load_task(str(FIXTURE))
    assert [(c.name, c.evolvable) for c in task.seed_components] == [("role", True), ("format", True), ("reply", False)]
    assert task.seed_prompt == comp.render(task.seed_components)
    assert load_task("rules").seed_components is None


BASE = '''name = "t"
train = "train.jsonl"
val = "val.jsonl"
[metric]
file = "metric.py"
'''


@pytest.mark.parametrize("tables, expected", [
    ('[[component]]\nname = "a"\ntext = "x"\ncolour = "red"\n', "unknown key(s) colour"),
    ('[[component]]\nname = ""\ntext = "x"\n', "must be a non-empty string"),
    ('[[component]]\nname = "a"\ntext = "x"\n[[component]]\nname = "a"\ntext = "y"\n', "duplicate name 'a'"),
    ('[[component]]\nname = "a"\ntext = "x"\nevolvable = false\n', "no component is evolvable"),
    ('[[component]]\nname = "a"\n', "exactly one of text"),
    ('seed_prompt = "s.txt"\n[[component]]\nname = "a"\ntext = "x"\n', "both seed_prompt and [[component]]"),
])
def test_bad_component_tables_are_clear_errors(tmp_path: Path, tables: str, expected: str) -> None:
    for name in ("train.jsonl", "val.jsonl", "metric.py"):
        (tmp_path / name).write_text((FIXTURE / name).read_text())
    head, sep, rest = tables.partition("[[component]]")
    (tmp_path / "task.toml").write_text(head + BASE.replace("[metric]", sep + rest + "[metric]", 1)
                                        if head else BASE.replace("[metric]", tables + "[metric]", 1))
    with pytest.raises(TaskError) as err:
        load_task(str(tmp_path))
    assert expected in str(err.value) and "task.toml" in str(err.value)


# -- reflection -----------------------------------------------------------------------------------

def test_one_target_is_the_first_fence_and_the_others_are_read_only_context() -> None:
    msgs = reflection.build_component_messages("d", PARTS, ["format"], [
        {"input": "i", "output": "o", "score": 0.5, "feedback": "f"}])
    user = msgs[1]["content"]
    assert re.search(r"```\n(.*?)\n```", user, re.S).group(1) == "One line."
    assert "> You answer." in user and "> Only the list." in user
    child, changed, why = reflection.parse_component_reply("```\nOne line, joined.\n```", PARTS, ["format"])
    assert changed == ["format"] and why == ""
    assert comp.parse_rendering(child, PARTS)[0] == PARTS[0]  # untouched components kept
    assert reflection.parse_component_reply("```\nOne line.\n```", PARTS, ["format"])[2] == "no change from parent"
    assert "heading" in reflection.parse_component_reply("```\nx\n## [role]\ny\n```", PARTS, ["format"])[2]


def test_all_mode_reply_is_parsed_by_name() -> None:
    reply = "Here:\n### [role]\n```\nYou answer briefly.\n```\n### [format]\n```\nOne line only.\n```\n"
    child, changed, _ = reflection.parse_component_reply(reply, PARTS, ["role", "format"])
    assert changed == ["role", "format"]
    assert [c.text for c in comp.parse_rendering(child, PARTS)] == ["You answer briefly.", "One line only.",
                                                                      "Only the list."]
    # A component the reply leaves out stays as it is.
    partial = "### [format]\n```\nTwo lines.\n```"
    assert reflection.parse_component_reply(partial, PARTS, ["role", "format"])[1] == ["format"]


# -- merge ----------------------------------------------------------------------------------------

def test_per_component_merge_unites_edits_of_different_and_same_components() -> None:
    base = art("b", PARTS)
    ours = art("o", comp.replace(PARTS, {"role": "You answer.\nBe brief."}), ["b"])
    theirs = art("t", comp.replace(PARTS, {"format": "One line.\nUse ' ; '."}), ["b"])
    merged = comp.parse_rendering(merge.merge_text(base, ours, theirs), PARTS)
    assert [c.text for c in merged[:2]] == ["You answer.\nBe brief.", "One line.\nUse ' ; '."]
    both = art("t2", comp.replace(PARTS, {"role": "Be kind.\nYou answer."}), ["b"])
    assert comp.parse_rendering(merge.merge_text(base, ours, both), PARTS)[0].text == "Be kind.\nYou answer.\nBe brief."
    clash = art("t3", comp.replace(PARTS, {"role": "You reply."}), ["b"])
    assert merge.merge_text(base, art("o2", comp.replace(PARTS, {"role": "You write."}), ["b"]), clash) is None
    assert merge.merge_text(base, ours, ours) is None  # nothing to unite


# -- runs -----------------------------------------------------------------------------------------

COMPONENTS_TOML = '''
[[component]]
name = "role"
text = "Answer with one word."

[[component]]
name = "style"
text = "Be terse."

[[component]]
name = "fixed"
text = "Never explain."
evolvable = false
'''


def components_task(folder: Path) -> None:
    toml = (folder / "task.toml").read_text().replace('seed_prompt = "seed_prompt.txt"\n', "")
    (folder / "task.toml").write_text(toml.replace("[metric]", COMPONENTS_TOML + "\n[metric]"))


async def test_round_robin_keeps_untouched_components_and_resume_restores_them(harness) -> None:
    components_task(harness.task_dir)
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 4})
    await harness.run_to_end(run)
    pool = run.ctx.pool
    seed = pool.get("a000000")
    assert [c.name for c in seed.components] == ["role", "style", "fixed"]
    proposals = [r for r in harness.fake.requests if r.stage == "propose"]
    targets = [re.search(r"## Current instructions: component \[(\w+)\]", r.user).group(1) for r in proposals]
    assert targets[:2] == ["role", "style"]  # the seed's turn: round robin over the evolvable ones
    assert "fixed" not in targets and all("> Never explain." in r.user for r in proposals)
    children = [a for a in pool.artifacts() if a.parent_ids]
    assert children, "no child was accepted"
    for child in children:
        parent = pool.get(child.parent_ids[0])
        assert child.text == comp.render(child.components)
        assert child.meta["changed_components"] == comp.changed(parent.components, child.components)
        assert child.components[2] == Component("fixed", "Never explain.", False)
    stored = {a.artifact_id: (a.text, a.components, a.status) for a in pool.artifacts()}

    run2 = await harness.resume(run.ctx.run_id, {"max_proposals": 4})
    restored = {a.artifact_id: (a.text, a.components, a.status) for a in run2.ctx.pool.artifacts()}
    assert restored == stored
    await harness.run_to_end(run2)


async def test_all_mode_rewrites_every_evolvable_component(harness) -> None:
    components_task(harness.task_dir)

    def named(req):
        if req.stage != "propose":
            return None
        missing = re.findall(r"Feedback: missing keyword (\w+)", req.user)
        blocks = re.findall(r"### \[(\w+)\]\n```\n(.*?)\n```", req.user, re.S)
        extra = f"KEYWORD-{missing[0]}" if missing else "NOTE"
        return completion("".join(f"### [{n}]\n```\n{body}\n{extra}\n```\n" for n, body in blocks))

    harness.fake.override = named
    run = await harness.create(pipeline={"mode": "sync", "component_selection": "all"}, budget={"max_proposals": 2})
    await harness.run_to_end(run)
    children = [a for a in run.ctx.pool.artifacts() if a.parent_ids]
    assert children and all(a.meta["changed_components"] == ["role", "style"] for a in children)
    assert all(a.components[2].text == "Never explain." for a in children)


async def test_a_speculative_insert_gets_its_components_from_its_text(harness) -> None:
    components_task(harness.task_dir)
    run = await harness.create(pipeline={"mode": "async", "speculation": True, "spec_alpha": 0.5,
                                         "max_in_flight": 2}, budget={"max_proposals": 4})
    await harness.run_to_end(run)
    assert run.ctx.tally.speculative_inserted > 0
    for a in run.ctx.pool.artifacts():
        assert a.components is not None and a.text == comp.render(a.components)
