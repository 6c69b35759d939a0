"""How the suite is split over pytest-xdist workers (`-n 2` in pyproject's addopts; `-n 0` runs it
in one process, where the hook below is never called).

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

Units are handed out longest first (by a rank from where the file is, then its test count), so
the run does not end on one worker finishing a long e2e file while the other has nothing left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_UNITS = {
    "tests/real/": "real_llm",
    "tests/e2e/test_ray_evaluator.py": "ray",
    "tests/e2e/test_ray_security.py": "ray",
}

# Where a unit's time goes, longest first: a llama.cpp server or Ray clusters, then CLI processes
# with simulated runs, sandboxed programs, Textual apps, and in-process unit tests.
HEAVY_FIRST = ("real_llm", "ray", "tests/e2e/", "tests/programs/", "tests/tui/", "tests/engine/")


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: a shared unit's name, else its file."""
    path = nodeid.split("::", 1)[0]
    for prefix, unit in SHARED_UNITS.items():
        if path.startswith(prefix):
            return unit
    return path


def unit_rank(unit: str, tests: int) -> tuple[int, int]:
    """Sort key putting the units expected to take longest first."""
    tier = next((i for i, place in enumerate(HEAVY_FIRST) if unit.startswith(place)), len(HEAVY_FIRST))
    return tier, -tests


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config):
    """On an xdist worker, tmp_path lives under <base>/1 instead of <base>/popen-gw1: Ray puts
    its sockets deep under the temp dir a test gives it, and the 6 more characters took
    .../sockets/plasma_store past the 107-byte limit of a unix socket path."""
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    given = Path(config.option.basetemp) if config.option.basetemp else None
    if worker and given is not None and given.name == f"popen-{worker}":
        config.option.basetemp = str(given.parent / worker.removeprefix("gw"))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown (and unused) without it
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":  # an explicit --dist choice is the caller's
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            # The base class hands out the queue's first unit: move the longest one there.
            first = min(self.workqueue, key=lambda unit: unit_rank(unit, len(self.workqueue[unit])))
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return SuiteScheduling(config, log)
