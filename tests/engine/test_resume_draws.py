"""What a resume needs to reproduce a run, piece by piece (issue 36; the end-to-end check is
tests/e2e/test_resume_reproduces.py): draw keys independent of arrival order, a simulator that
answers a keyed request from its key alone, the minibatch sampler's generator and LoongFlow's
island turn in the saved state, and per-item generators for draws made inside an item."""

from __future__ import annotations

import random

import httpx

from engine.config import EndpointConfig, SimConfig
from engine.items import current_item
from engine.llm.client import LLMClient
from engine.llm.draws import DrawKeys, messages_digest
from engine.llm.sim import sim_transport
from engine.run.state import RunState, part_states, restore_part_states, stateful_parts
from engine.pool import Artifact
from engine.selection.islands import IslandArchive, IslandSettings
from engine.selection.pareto import MinibatchSampler, item_rng
from engine.strategy.boltzmann import BoltzmannIslandSelector
from engine.tasks.ruleworld import RULES, generate_examples
from engine.tasks.sim_behaviours import all_behaviours

MSGS = [{"role": "system", "content": "Sort lists."}, {"role": "user", "content": "Items: b, a"}]


def _key_in(item: str | None, keys: DrawKeys, messages=MSGS, stage: str = "rollout") -> str:
    token = current_item.set(item)
    try:
        return keys.key("task", stage, messages)
    finally:
        current_item.reset(token)


def test_a_key_depends_on_item_stage_request_and_repeat_not_on_order() -> None:
    first, second = DrawKeys("7"), DrawKeys("7")
    a1, b1, a2 = _key_in("i000001", first), _key_in("i000002", first), _key_in("i000001", first)
    # Another process asks in another order: the same request of the same item gets the same key.
    assert [_key_in("i000002", second), _key_in("i000001", second), _key_in("i000001", second)] == [b1, a1, a2]
    assert len({a1, b1, a2}) == 3  # the repeat of an identical request is a new draw
    assert _key_in("i000001", DrawKeys("8")) != a1  # another run seed, other replies
    assert _key_in("i000001", DrawKeys("7"), stage="evaluate") != a1


def test_an_evaluations_scratch_folder_does_not_change_the_key() -> None:
    def failed(path: str) -> list[dict]:
        return [{"role": "user", "content": f'stderr tail:   File "{path}/program.py", line 21'}]
    assert (messages_digest(failed("/tmp/evotui-eval-15889-2553f1-ze9msajo"))
            == messages_digest(failed("/var/tmp/evotui-eval-16228-1cf2c4-6wvvjxgt")))
    assert messages_digest(failed("/tmp/evotui-eval-1-a-b")) != messages_digest(MSGS)


async def _replies(order: list[str]) -> dict[str, str]:
    """Rollouts of several items through a fresh simulator, the items asked in `order`."""
    transport, _ = sim_transport(SimConfig(time_scale=5000), behaviours=all_behaviours())
    client = LLMClient(EndpointConfig(url="sim://"), name="task", transport=transport, draw_salt="3")
    system = "\n".join(r.statement for r in RULES)
    examples = generate_examples(5, 4, "t")
    out = {}
    try:
        for item in order:
            token = current_item.set(item)
            try:
                for i, ex in enumerate(examples):
                    res = await client.chat([{"role": "system", "content": system},
                                             {"role": "user", "content": ex["input"]}], stage="rollout")
                    out[f"{item}/{i}"] = f"{res.completion_tokens}|{res.text}"
            finally:
                current_item.reset(token)
    finally:
        await client.aclose()
    return out


async def test_the_simulator_answers_a_keyed_request_from_its_key_alone() -> None:
    items = [f"i{n:06d}" for n in range(1, 5)]
    forward, backward = await _replies(items), await _replies(items[::-1])
    assert forward == backward  # text and length: the arrival order changed nothing
    assert len(set(forward.values())) > len(forward) // 2  # and the draws do differ between requests


def test_the_minibatch_sampler_resumes_past_an_epoch_with_its_generator() -> None:
    ids = [f"t{i}" for i in range(7)]
    whole = MinibatchSampler(ids, 3, random.Random(5))
    run = [whole.next() for _ in range(3)]
    saved = RunState.from_dict(RunState(sampler=whole.state()).to_dict()).sampler  # through JSON form
    resumed = MinibatchSampler(ids, 3, random.Random(5))  # a new process: the generator starts over
    resumed.restore(saved)
    later = [whole.next() for _ in range(6)]  # three epochs more: each reshuffles
    assert [resumed.next() for _ in range(6)] == later
    fresh = MinibatchSampler(ids, 3, random.Random(5))
    fresh.restore({"order": saved["order"], "pos": saved["pos"]})  # the old stored form: no generator
    assert [fresh.next() for _ in range(6)] != later and run


def test_loongflow_island_turn_is_saved_and_restored() -> None:
    settings = IslandSettings(islands=3)
    islands = IslandArchive(settings, [Artifact("a000000", "seed text", (), 0, {"v": 0.5}, "seed", 0.0)])
    selector = BoltzmannIslandSelector(settings)
    taken = [selector.island(islands) for _ in range(5)]  # five picks made
    parts = stateful_parts((selector, object()))
    assert parts == (selector,)
    stored = RunState.from_dict(RunState(strategy=part_states(parts)).to_dict()).strategy
    assert stored == {"loongflow.selector": {"turn": 5, "visits": {}}}  # island() picks no parent: no visits
    again = BoltzmannIslandSelector(settings)
    restore_part_states(stateful_parts((again,)), stored)
    assert again.island(islands) == selector.island(islands)  # the resumed run's next pick
    fresh = BoltzmannIslandSelector(settings)
    restore_part_states(stateful_parts((fresh,)), None)  # a state saved before: it starts over
    assert fresh.state() == {"turn": 0, "visits": {}} and taken


def test_an_items_generator_is_its_own() -> None:
    draws = [item_rng(11, "i000004", "inspirations").random() for _ in range(2)]
    assert draws[0] == draws[1]
    assert item_rng(11, "i000005", "inspirations").random() != draws[0]
    assert item_rng(12, "i000004", "inspirations").random() != draws[0]
