"""Typed components and frozen regions (issue 15 item 1): loading, checks, the proposer's rules
section, enforcement on proposals and hot-swap edits, persistence, and the simulator's frozen
regions."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from engine import components as comp
from engine.components import Component
from engine.components.hot_swap import HotSwapError, check_edit
from engine.llm.sim import frozen as sim_frozen
from engine.pool import Artifact
from engine.tasks import agentworld_sim
from engine.tasks.adapter_task import seed_components
from engine.tasks.prompt_task import TaskError, load_task
from tests.engine.fakes import completion, harness  # noqa: F401

CODE = 'def f(x):\n    """Double it."""\n    return 2 * x'
TOOL = Component("tool", CODE, True, "tool_code", ("def f(x):",))


def write_components(folder: Path, tables: str) -> None:
    toml = (folder / "task.toml").read_text().replace('seed_prompt = "seed_prompt.txt"\n', "")
    (folder / "task.toml").write_text(toml.replace("[metric]", tables + "\n[metric]"))


# -- loading --------------------------------------------------------------------------------------

def test_agent_tools_declares_its_types_and_the_def_line_frozen() -> None:
    parts = {c.name: c for c in load_task("agent_tools").seed_components}
    assert {n: c.type for n, c in parts.items()} == {"system": "prompt", "tool_lookup": "tool_description",
                                                     "tool_convert": "tool_description", "round_total": "tool_code",
                                                     "house": "text"}
    assert parts["round_total"].frozen == ("def round_total(x):",)
    assert not parts["house"].evolvable


def test_types_default_to_text_and_marked_regions_join_declared_ones(harness) -> None:
    write_components(harness.task_dir, '''
[[component]]
name = "role"
text = "Answer with one word.\\n# evotui:frozen\\nNever swear.\\n# evotui:end-frozen\\nBe kind."
frozen = ["Answer with one word."]

[[component]]
name = "cfg"
type = "agent_config"
text = "temperature = 0.2\\nmodel = \\"m\\""
''')
    role, cfg = load_task(str(harness.task_dir)).seed_components
    assert role.type == "text"
    assert role.frozen == ("Answer with one word.", "# evotui:frozen\nNever swear.\n# evotui:end-frozen")
    assert (cfg.type, cfg.frozen) == ("agent_config", ())


@pytest.mark.parametrize("table, expected", [
    ('type = "script"', ("component 'a': unknown type 'script'; allowed types: prompt, tool_description, tool_code, "
                         "agent_config, text")),
    ('frozen = ["not in the text"]', "frozen region `not in the text` is not in its text"),
    ('frozen = "Say hi."', "frozen must be a list of non-empty texts"),
    ('frozen = [""]', "frozen must be a list of non-empty texts"),
    ('type = "tool_code"', "its text (type tool_code) is not valid Python (line 1"),
    ('type = "agent_config"', "its text (type agent_config) is neither valid JSON nor valid TOML"),
])
def test_bad_types_and_regions_are_clear_config_errors(harness, table: str, expected: str) -> None:
    write_components(harness.task_dir, f'[[component]]\nname = "a"\ntext = "Say hi."\n{table}\n')
    with pytest.raises(TaskError) as err:
        load_task(str(harness.task_dir))
    assert expected in str(err.value) and "[[component]]" in str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("a\n# evotui:frozen\nb", "line 2: `# evotui:frozen` is never closed"),
    ("a\n# evotui:end-frozen", "line 2: `# evotui:end-frozen` without a `# evotui:frozen` line before it"),
    ("# evotui:frozen\n# evotui:frozen\n# evotui:end-frozen", "line 2: `# evotui:frozen` inside a frozen region"),
])
def test_unbalanced_markers_are_refused(text: str, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        comp.with_rules(Component("a", text))


def test_adapter_seed_types_are_checked_with_value_errors() -> None:
    parts = seed_components({"p": "Be brief.", "code": CODE}, {"code": "tool_code"}, {"code": ["def f(x):"]})
    assert [(c.type, c.frozen) for c in parts] == [("text", ()), ("tool_code", ("def f(x):",))]
    with pytest.raises(ValueError, match="unknown type 'bash'; allowed types: prompt"):
        seed_components({"p": "Be brief."}, {"p": "bash"})
    with pytest.raises(ValueError, match="component_types names 'q', not in seed_candidate"):
        seed_components({"p": "Be brief."}, {"q": "prompt"})


# -- checks ---------------------------------------------------------------------------------------

def test_refusal_names_the_region_or_the_syntax_error() -> None:
    assert comp.refusal(TOOL, CODE + "\n# reviewed") is None
    assert comp.refusal(TOOL, "def f(y):\n    return 2 * y") == \
        ("frozen region", "[tool] drops or alters frozen region 1 `def f(x):`")
    key, message = comp.refusal(TOOL, "def f(x):\n    return (2 * x")
    assert key == "invalid tool_code" and message.startswith("[tool] is not valid Python (line 2")
    prose = Component("p", "Keep calm. Be brief.", True, "prompt", ("Keep calm.",))
    assert comp.refusal(prose, "Keep calm. Be very brief.") is None
    assert comp.refusal(prose, "Keep cool. Be brief.")[0] == "frozen region"


def test_agent_config_stays_in_the_format_it_has() -> None:
    as_json = Component("c", '{"temperature": 0.2}', True, "agent_config")
    assert comp.refusal(as_json, '{"temperature": 0.3}') is None
    assert comp.refusal(as_json, "temperature = 0.3")[0] == "invalid agent_config"
    as_toml = Component("c", "temperature = 0.2", True, "agent_config")
    assert comp.refusal(as_toml, "temperature = 0.3\nmodel = 'm'") is None
    key, message = comp.refusal(as_toml, "temperature = ")
    assert key == "invalid agent_config" and "is not valid TOML" in message


def test_enforce_puts_back_only_the_refused_components() -> None:
    parent = (Component("p", "Be brief.", True, "prompt"), TOOL)
    child = comp.replace(parent, {"p": "Be brief. Be kind.", "tool": "return 1"})
    kept, refused = comp.enforce(parent, child)
    assert [c.text for c in kept] == ["Be brief. Be kind.", CODE]
    assert kept[1] == TOOL and list(refused) == ["tool"] and refused["tool"][0] == "frozen region"


def test_rules_section_states_the_type_and_quotes_the_regions() -> None:
    parts = (Component("p", "Be brief."), Component("q", "x", True, "prompt"), TOOL)
    assert comp.rules_section(parts, ["p"]) is None  # plain text: the prompt stays as it was
    section = comp.rules_section(parts, ["tool", "q"])
    assert "Component [tool] has type tool_code: the Python source of a tool function; it must stay valid Python" \
        in section
    assert "Frozen region 1 of [tool]:\n> def f(x):\n" in section and "Component [q] has type prompt" in section
    assert sim_frozen.frozen_regions(section) == {"tool": ["def f(x):"]}
    config = comp.rules_section((Component("c", "a = 1", True, "agent_config"),), ["c"])
    assert "it must stay valid TOML, as it is now" in config


# -- persistence ----------------------------------------------------------------------------------

def test_types_and_regions_round_trip_and_old_rows_load_with_defaults() -> None:
    parts = (Component("p", "Be brief.", False), TOOL)
    assert comp.from_json(comp.to_json(parts)) == parts
    old = [{"name": "p", "text": "Be brief.", "evolvable": False}, {"name": "tool", "text": CODE}]
    assert comp.from_json(old) == (Component("p", "Be brief.", False, "text", ()), Component("tool", CODE))
    with pytest.raises(ValueError, match="unknown type 'shell'"):
        comp.from_json([{"name": "p", "text": "x", "type": "shell"}])


def test_a_rendering_read_back_keeps_types_and_regions() -> None:
    parts = (Component("p", "Be brief.", True, "prompt"), TOOL)
    back = comp.parse_rendering(comp.render(comp.replace(parts, {"p": "Be kind."})), parts)
    assert [(c.type, c.frozen) for c in back] == [("prompt", ()), ("tool_code", ("def f(x):",))]


# -- hot-swap -------------------------------------------------------------------------------------

def _base(parts) -> Artifact:
    return Artifact(artifact_id="a000000", text=comp.render(parts), parent_ids=(), created_version=1,
                    val_scores={}, components=tuple(parts))


def test_hot_swap_refuses_a_broken_region_or_syntax_and_a_frozen_component() -> None:
    base = _base((TOOL, Component("house", "Be polite.", False)))
    with pytest.raises(HotSwapError, match=re.escape("component [tool] drops or alters frozen region 1 `def f(x):`")):
        check_edit(base, "tool", "def g(x):\n    return x")
    with pytest.raises(HotSwapError, match=re.escape("component [tool] is not valid Python (line 2")):
        check_edit(base, "tool", "def f(x):\n    return (x")
    with pytest.raises(HotSwapError, match="is frozen"):
        check_edit(base, "house", "Be rude.")
    edited = check_edit(base, "tool", "def f(x):\n    return 3 * x")
    assert edited[0] == Component("tool", "def f(x):\n    return 3 * x", True, "tool_code", ("def f(x):",))


# -- enforcement in a run -------------------------------------------------------------------------

TYPED = '''
[[component]]
name = "role"
type = "prompt"
text = "Answer with one word."
frozen = ["Answer with one word."]

[[component]]
name = "code"
type = "tool_code"
text = "def pick(x):\\n    return x"
frozen = ["def pick(x):"]
'''


async def test_a_proposal_that_drops_a_region_fails_and_is_counted(harness) -> None:
    write_components(harness.task_dir, TYPED)

    def rewrite(req):
        return completion("```\nSay KEYWORD-alpha.\n```") if req.stage == "propose" else None

    harness.fake.override = rewrite
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 3})
    await harness.run_to_end(run)
    proposals = [r for r in harness.fake.requests if r.stage == "propose"]
    assert len(proposals) == 3
    assert "Frozen region 1 of [role]:\n> Answer with one word." in proposals[0].user
    assert "Component [code] has type tool_code" in proposals[1].user
    tally = run.ctx.tally
    assert tally.failed == 3 and tally.fail_reasons["component update refused"] == 3
    assert tally.fail_reasons["component refused: frozen region"] == 3
    assert [a.artifact_id for a in run.ctx.pool.artifacts()] == ["a000000"]
    items = [r for r in await harness.rows("items", run.ctx.run_id) if r["outcome"] == "failed"]
    assert items and all(r["error"].startswith("component update refused: [") for r in items), items


async def test_all_mode_keeps_the_allowed_update_and_resume_keeps_the_rules(harness) -> None:
    write_components(harness.task_dir, TYPED)

    def both(req):
        if req.stage != "propose":
            return None
        kw = re.findall(r"missing keyword (\w+)", req.user)
        return completion(f"### [role]\n```\nAnswer with one word.\nKEYWORD-{kw[0] if kw else 'x'}\n```\n"
                          "### [code]\n```\ndef pick(x):\n    return (x\n```\n")

    harness.fake.override = both
    run = await harness.create(pipeline={"mode": "sync", "component_selection": "all"}, budget={"max_proposals": 2})
    await harness.run_to_end(run)
    assert run.ctx.tally.fail_reasons["component refused: invalid tool_code"] == 2
    assert run.orchestrator.handlers.figures()["component_refusals"] == {"invalid tool_code": 2}
    children = [a for a in run.ctx.pool.artifacts() if a.parent_ids]
    assert children, "no child was accepted"
    for child in children:
        assert child.meta["changed_components"] == ["role"]
        assert child.meta["refused_components"]["code"].startswith("[code] is not valid Python")
        assert child.components[1] == Component("code", "def pick(x):\n    return x", True, "tool_code",
                                                ("def pick(x):",))
    stored = {a.artifact_id: a.components for a in run.ctx.pool.artifacts()}
    run2 = await harness.resume(run.ctx.run_id, {"max_proposals": 2})
    assert {a.artifact_id: a.components for a in run2.ctx.pool.artifacts()} == stored
    await harness.run_to_end(run2)


# -- the simulator --------------------------------------------------------------------------------

class Draws(random.Random):
    """An rng whose random() returns the given values in turn (and fails when they run out)."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_sim_keeps_a_region_with_its_probability_and_draws_nothing_without_one() -> None:
    text = "def round_total(x):\n    return round(x, 2)"
    assert sim_frozen.keep_frozen(text, ["def round_total(x):"], Draws(sim_frozen.P_KEEP_FROZEN - 0.01)) == (text, 0)
    assert sim_frozen.keep_frozen(text, ["def round_total(x):"], Draws(sim_frozen.P_KEEP_FROZEN)) == \
        ("    return round(x, 2)", 1)
    assert sim_frozen.keep_frozen(text, [], Draws()) == (text, 0)  # no region: no draw
    assert sim_frozen.P_KEEP_FROZEN == 0.9


def test_agent_reflector_passes_the_rewrite_through_the_frozen_regions() -> None:
    user = ("## Current instructions: component [round_total]\n```\ndef round_total(x):\n    return int(x)\n```\n"
            "## Examples\n### Example 1\nInput:\nOrder: 2 x lamp\nPay in: EUR\nOutput:\nTOTAL: 3 EUR\nScore: 0.60\n"
            "Feedback: The amount 3 is not rounded to cents: the tool function round_total (component round_total) "
            "truncates it.\n\n"
            + comp.rules_section((Component("round_total", "def round_total(x):\n    return int(x)", True,
                                            "tool_code", ("def round_total(x):",)),), ["round_total"]))
    replies = [agentworld_sim.reflect(user, random.Random(seed)) for seed in range(40)]
    dropped = [r for r in replies if "def round_total(x):" not in re.search(r"```\n(.*?)\n```", r, re.DOTALL).group(1)]
    assert 0 < len(dropped) < len(replies) // 2, (len(dropped), len(replies))  # P_KEEP_FROZEN = 0.9 over 40 seeds
    assert all("dropped 1 frozen region" in r for r in dropped)
