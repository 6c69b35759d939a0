"""The bench's best-of-N baseline runs through evotui.optimize too (issue 34: best-of-N on the
adapter task): `python -m evotui.bench.optimize --rows evotui-best-of-n`."""

from __future__ import annotations

import evotui
from evotui.bench import bestofn
from evotui.bench.optimize import row_options
from tests.engine.test_api import SEED, KeywordAdapter, _data


def test_the_row_names_the_baseline_strategy_in_sync():
    assert row_options("evotui-best-of-n") == {"strategy": bestofn.NAME, "mode": "sync"}
    assert row_options("evotui-best-of-x") is None


def test_every_candidate_is_a_child_of_the_seed(tmp_path):
    res = evotui.optimize(SEED, _data(6, 0), _data(4, 10), KeywordAdapter(), max_proposals=4,
                          db=tmp_path / "b.db", **row_options("evotui-best-of-n"))
    assert res.status == "completed" and len(res.candidates) >= 3
    assert res.parents[0] == [None] and all(p == [0] for p in res.parents[1:])
