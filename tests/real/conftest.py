"""Real-server tests: a managed llama.cpp server (xllamacpp) with the bundled SmolLM2-135M.

Skipped when the local backend is missing, unless EVOTUI_REQUIRE_REAL_LLM=1 (CI sets it), which
turns a missing backend into a failure. Skip them on purpose with `-m "not real_llm"`.
Budgets are tiny (a handful of proposals, short answers) so the whole folder stays within a few
minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.llm.local import INSTALL_HINT, bundled_model, xllamacpp_available

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = os.environ.get("EVOTUI_REQUIRE_REAL_LLM") == "1"


def backend_problem() -> str | None:
    if not xllamacpp_available():
        return f"xllamacpp is not installed ({INSTALL_HINT})"
    if bundled_model() is None:
        return f"the bundled GGUF model is not installed ({INSTALL_HINT})"
    return None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.real_llm)


@pytest.fixture(autouse=True)
def _real_backend():
    problem = backend_problem()
    if problem is not None:
        if REQUIRE:
            pytest.fail(f"EVOTUI_REQUIRE_REAL_LLM=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture(scope="session")
def mini_task(tmp_path_factory) -> Path:
    """The built-in rules task cut to 4 training and 3 validation examples."""
    src = ROOT / "tasks" / "rules"
    dst = tmp_path_factory.mktemp("task") / "mini-rules"
    dst.mkdir()
    for name in ("task.toml", "seed_prompt.txt", "metric.py"):
        shutil.copy(src / name, dst / name)
    for name, n in (("train.jsonl", 4), ("val.jsonl", 3)):
        lines = (src / name).read_text().splitlines()[:n]
        (dst / name).write_text("\n".join(lines) + "\n")
    return dst


def write_config(path: Path, *, max_tokens: int = 48, reflection_tokens: int = 96) -> Path:
    """Short answers: rollouts need one line, proposals a short block."""
    path.write_text(
        "[task_llm]\n"
        f'url = "local://"\nmodel = "local"\nmax_tokens = {max_tokens}\ntemperature = 0.3\nstream = true\n'
        "[reflection_llm]\n"
        f'url = "local://"\nmodel = "local"\nmax_tokens = {reflection_tokens}\ntemperature = 0.3\nstream = true\n'
        "[local]\nparallel = 4\nctx = 1024\n"
        "[pipeline]\nminibatch_size = 2\nmax_in_flight = 2\n"
    )
    return path


def launcher_pids() -> set[int]:
    """PIDs of running local_launcher processes (the managed servers)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # exited while we looked
        if b"engine.llm.local_launcher" in cmd:
            pids.add(int(entry.name))
    return pids


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if Path(f"/proc/{p}").exists() and _not_zombie(p)}
        time.sleep(0.1)
    return alive


def _not_zombie(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]) != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def served():
    """`evotui local serve --port 0` as a child: yields its JSON line (url, model, pid, slots)."""
    if backend_problem() is not None:
        yield None
        return
    proc = subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "local", "serve", "--port", "0", "--parallel", "2", "--ctx", "512",
         "--alias", "smol"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=10)
        pytest.fail(f"evotui local serve did not start: {proc.stderr.read()[-2000:]}")
    info = json.loads(line)
    info["proc"] = proc
    yield info
    proc.terminate()
    proc.wait(timeout=20)
