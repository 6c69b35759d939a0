"""How tests/conftest.py splits the suite over pytest-xdist workers: which tests share a unit, and
that xdist's scheduler with it hands out the longest units first, each whole to one worker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import pytest_xdist_make_scheduler, unit_of


def test_a_file_is_one_unit_and_the_shared_units_hold_their_files():
    assert unit_of("tests/engine/test_store.py::test_x[a]") == "tests/engine/test_store.py"
    assert unit_of("tests/real/test_local_real.py::t") == unit_of("tests/real/test_sim_calibrate_real.py::t")
    assert unit_of("tests/e2e/test_ray_evaluator.py::a") == unit_of("tests/e2e/test_ray_security.py::b") == "ray"
    assert unit_of("tests/e2e/test_faults.py::a") != unit_of("tests/e2e/test_fault_kills.py::a")


class _Config:
    """What xdist's LoadScopeScheduling reads of pytest's config under `-n 2`."""

    option = SimpleNamespace(loadscopereorder=True)

    def getvalue(self, name: str):
        return {"dist": "load", "tx": ["2*popen"]}[name]


class _Node:
    """A worker as the scheduler sees it: the test indexes it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_longest_units_go_out_first_and_whole():
    pytest.importorskip("xdist")
    collection = ["tests/test_layering.py::a", "tests/engine/test_config.py::a", "tests/engine/test_config.py::b",
                  "tests/engine/test_config.py::c", "tests/e2e/test_ray_evaluator.py::a",
                  "tests/tui/test_app.py::a", "tests/e2e/test_faults.py::a", "tests/e2e/test_faults.py::b",
                  "tests/real/test_local_real.py::a", "tests/e2e/test_ray_security.py::a",
                  "tests/programs/test_sandbox.py::a"]
    sched = pytest_xdist_make_scheduler(_Config(), None)
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    first_units = [[{unit_of(collection[i]) for i in batch} for batch in node.sent] for node in nodes]
    # Each node starts with two units, the four expected to take longest, interleaved.
    assert first_units == [[{"real_llm"}, {"tests/e2e/test_faults.py"}], [{"ray"}, {"tests/programs/test_sandbox.py"}]]
    ray_batch = nodes[1].sent[0]
    assert sorted(collection[i] for i in ray_batch) == ["tests/e2e/test_ray_evaluator.py::a",
                                                        "tests/e2e/test_ray_security.py::a"]
    # Then the rest in rank order, the engine file with more tests before the top-level one.
    rest = []
    while sched.workqueue:
        sched._assign_work_unit(nodes[0])
        rest.append(unit_of(collection[nodes[0].sent[-1][0]]))
    assert rest == ["tests/tui/test_app.py", "tests/engine/test_config.py", "tests/test_layering.py"]
    sent = sorted(i for node in nodes for batch in node.sent for i in batch)
    assert sent == list(range(len(collection)))  # every test once
