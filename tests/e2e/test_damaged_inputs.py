"""Damaged task files through the CLI: one line naming the file, exit 2, no traceback, no database."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.costs.resources import data_dir
from tests.db_damage import damage_middle_leaf
from tests.e2e.conftest import FAST, ROOT, evotui, read_rows, summary_of

RULES = data_dir("tasks", "engine") / "rules"
CIRCLES = ROOT / "tasks" / "circle_packing"
BINARY = bytes(range(256)) * 4  # what a stray image or a truncated download looks like


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The whole of stderr is one `evotui: error:` line containing every needle."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evotui: error:"), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def refused(task: Path, db: Path, *needles: str) -> str:
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--max-proposals", "2", *FAST)
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(proc, *needles)
    assert not db.exists() and not Path(f"{db}-wal").exists()
    return line


def copy_task(src: Path, tmp_path: Path) -> Path:
    task = tmp_path / src.name
    shutil.copytree(src, task, ignore=shutil.ignore_patterns("__pycache__"))
    return task


@pytest.mark.parametrize("file", ["seed_prompt.txt", "train.jsonl", "val.jsonl", "task.toml"])
def test_a_binary_prompt_task_file_is_named(tmp_path: Path, db: Path, file: str) -> None:
    task = copy_task(RULES, tmp_path)
    (task / file).write_bytes(BINARY)
    refused(task, db, str(task / file), "not UTF-8")


def test_a_binary_component_file_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    toml = (task / "task.toml").read_text().replace('seed_prompt = "seed_prompt.txt"\n', "")
    assert "seed_prompt" not in toml  # the edit took: the component is the seed
    (task / "task.toml").write_text(toml + '\n[[component]]\nname = "rules"\nfile = "part.txt"\n')
    (task / "part.txt").write_bytes(BINARY)
    refused(task, db, str(task / "part.txt"), "component 'rules'", "not UTF-8")


def test_a_binary_initial_program_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(CIRCLES, tmp_path)
    (task / "initial_program.py").write_bytes(BINARY)
    refused(task, db, str(task / "initial_program.py"), "initial program", "not UTF-8")


def test_a_binary_openevolve_config_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(CIRCLES, tmp_path)
    (task / "task.toml").unlink()  # OpenEvolve layout: initial_program.py + evaluator.py + config.yaml
    (task / "config.yaml").write_bytes(BINARY)
    refused(task, db, str(task / "config.yaml"), "not UTF-8")


def test_an_unknown_key_inside_metric_is_refused(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    toml = (task / "task.toml").read_text()
    assert "[metric]" in toml
    (task / "task.toml").write_text(toml.replace("[metric]\n", "[metric]\nfunktion = \"score\"\n"))
    refused(task, db, str(task / "task.toml"), "[metric]", "funktion", "allowed: file, function, range")


def test_an_unknown_key_inside_input_is_refused(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    (task / "task.toml").write_text((task / "task.toml").read_text() + '\n[input]\ntemplat = "{input}"\n')
    refused(task, db, "[input]", "templat", "allowed: template")


# -- a damaged database ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_db(tmp_path_factory) -> Path:
    """A real run's database (the simulated backend), made once for this module's tests."""
    db = tmp_path_factory.mktemp("run") / "runs.db"
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", "20", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return db


def damaged_copy(run_db: Path, tmp_path: Path, table: str = "llm_calls") -> Path:
    db = tmp_path / "damaged.db"
    shutil.copy(run_db, db)
    damage_middle_leaf(db, table)
    return db


@pytest.mark.parametrize("command", [
    ["resume", "--no-ui", "--quiet"],
    ["run", "rules", "--no-ui", "--max-proposals", "2", *FAST],
    ["show"], ["runs"], ["show", "--json"], ["export", "RUN", "out"],
])
def test_a_damaged_database_is_refused_by_every_command(run_db: Path, tmp_path: Path, command: list[str]) -> None:
    db = damaged_copy(run_db, tmp_path)
    run_id = read_rows(run_db, "SELECT run_id FROM runs")[0][0]
    args = [str(tmp_path / a) if a == "out" else run_id if a == "RUN" else a for a in command]
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    proc = evotui(*args, "--db", str(db))
    assert proc.returncode == 2, proc.stderr
    one_line_error(proc, str(db), "is damaged", f"evotui recover {db}")
    assert proc.stdout == ""
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # nothing written, no new run
    assert not (tmp_path / "out").exists()


# -- stdout closed early ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["runs"], ["show"], ["show", "--json"], ["strategies"]])
def test_a_closed_stdout_ends_quietly(run_db: Path, command: list[str]) -> None:
    """`evotui runs | head -0`: the reader is gone before the first write (closed here at once,
    so the command cannot finish writing first)."""
    db_args = [] if command == ["strategies"] else ["--db", str(run_db)]
    proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", *command, *db_args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err  # 128 + SIGPIPE, as a shell reports `cat` in a pipe
    assert err == ""


# -- evotui recover -----------------------------------------------------------------------------------


def test_recover_salvages_a_damaged_run_which_then_resumes(run_db: Path, tmp_path: Path) -> None:
    db = damaged_copy(run_db, tmp_path, table="llm_calls")
    out = tmp_path / "recovered.db"
    proc = evotui("recover", str(db), str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    tables = {t["table"]: t for t in report["tables"]}
    calls = tables["llm_calls"]
    total = read_rows(run_db, "SELECT count(*) FROM llm_calls")[0][0]
    assert calls["expected"] == total and 0 < calls["lost"] == total - calls["kept"]
    assert read_rows(out, "SELECT count(*) FROM llm_calls")[0][0] == calls["kept"]
    assert tables["artifacts"]["lost"] == 0 and not report["complete"]
    assert read_rows(out, "PRAGMA integrity_check") == [("ok",)]
    listed = evotui("runs", "--db", str(out))
    assert listed.returncode == 0 and read_rows(run_db, "SELECT run_id FROM runs")[0][0] in listed.stdout
    resumed = evotui("resume", "--db", str(out), "--no-ui", "--quiet", "--max-proposals", "24")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert summary_of(resumed)["proposal_attempts"] == 24


def test_recover_prints_what_was_kept_and_lost(run_db: Path, tmp_path: Path) -> None:
    db = damaged_copy(run_db, tmp_path, table="llm_calls")
    out = tmp_path / "recovered.db"
    proc = evotui("recover", str(db), str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{db}: ") and "page" in lines[0]  # SQLite's complaint
    calls = next(ln.split() for ln in lines if ln.startswith("llm_calls "))
    assert int(calls[1]) == read_rows(out, "SELECT count(*) FROM llm_calls")[0][0] and int(calls[2]) > 0
    assert lines[-1].startswith(f"wrote {out}:") and "rows lost in llm_calls" in lines[-1]


@pytest.mark.parametrize("problem", ["missing", "exists", "not sqlite"])
def test_recover_refuses_unusable_paths(run_db: Path, tmp_path: Path, problem: str) -> None:
    source, out = run_db, tmp_path / "out.db"
    if problem == "missing":
        source = tmp_path / "nope.db"
    elif problem == "exists":
        out.write_text("keep me")
    else:
        source = tmp_path / "notes.db"
        source.write_text("not a database\n" * 100)
    proc = evotui("recover", str(source), str(out))
    assert proc.returncode == 2
    one_line_error(proc, {"missing": "no database at", "exists": "already exists",
                          "not sqlite": "not an SQLite database"}[problem])
    assert (out.read_text() == "keep me") if problem == "exists" else not out.exists()
