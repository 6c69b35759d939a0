"""How the suite is split over pytest-xdist workers (`python -m pytest -n 2`); a plain
`python -m pytest` never calls the hook below.

Each test file is one unit of work, run on one worker, so a module-scoped set-up (a shared run,
a Ray head, a llama.cpp server) is made once, as in a serial run. Some files share one unit
because their tests must not overlap with each other:
- tests/real/: a test compares the machine's llama.cpp launcher processes before and after a run
  (tests/real/conftest.py: launcher_pids), so a server started on another worker would count
  as its own.
- the Ray tests: each file starts Ray clusters (GCS, raylet, workers); two at once on 2 cores
  starve each other past their start-up limits.
xdist's own `--dist loadgroup` cannot do this on pytest 9: it marks a group by rewriting
`item._nodeid`, which pytest 9 no longer reads, so its groups silently split.
"""

from __future__ import annotations

import pytest

SHARED_UNITS = {
    "tests/real/": "real_llm",
    "tests/e2e/test_ray_evaluator.py": "ray",
    "tests/e2e/test_ray_security.py": "ray",
}


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: a shared unit's name, else its file."""
    path = nodeid.split("::", 1)[0]
    for prefix, unit in SHARED_UNITS.items():
        if path.startswith(prefix):
            return unit
    return path


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown (and unused) without it
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":  # an explicit --dist choice is the caller's
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return SuiteScheduling(config, log)
