"""User mistakes get one clear line, a non-zero exit, no traceback and nothing half-written."""

import sqlite3

import pytest

from tests.e2e.conftest import FAST, evotui, free_port


def _one_clear_error(proc, *needles):
    assert "Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err and err[-1].startswith("evotui: error:"), proc.stderr
    for needle in needles:
        assert needle in err[-1], err[-1]


def test_missing_task_folder(db):
    proc = evotui("run", "no-such-task", "--no-ui", "--db", str(db), *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "no-such-task", "rules")
    assert not db.exists()


def test_malformed_task_toml_and_jsonl(db, tmp_path):
    task = tmp_path / "t"
    task.mkdir()
    (task / "task.toml").write_text("name = 'x\n")
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "task.toml", "TOML")
    (task / "task.toml").write_text(
        'name="x"\nseed_prompt="p.txt"\ntrain="train.jsonl"\nval="val.jsonl"\n[metric]\nfile="m.py"\n')
    (task / "p.txt").write_text("Answer.")
    (task / "train.jsonl").write_text('{"id": "a", "input": "x"}\n{"id": "b", "input": \n')
    (task / "val.jsonl").write_text('{"id": "v", "input": "y"}\n')
    (task / "m.py").write_text("def score(example, output):\n    return 1.0\n")
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "train.jsonl:2")


def test_unknown_config_key(db, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[pipeline]\nmode = 'async'\nwokers = 3\n")
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--config", str(cfg), *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "unknown key", "wokers")


def test_bad_workers_flag(db):
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--workers", "rollout=x", *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "--workers")


def test_unreachable_endpoint(db):
    port = free_port()
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--llm-url", f"http://127.0.0.1:{port}/v1", *FAST)
    assert proc.returncode == 3
    _one_clear_error(proc, "cannot reach", str(port))
    if db.exists():
        assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_unwritable_database_path(tmp_path):
    proc = evotui("run", "rules", "--no-ui", "--db", str(tmp_path / "missing-dir" / "x.db"), *FAST)
    assert proc.returncode == 2
    _one_clear_error(proc, "missing-dir")


def test_database_from_newer_schema(db):
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.execute("PRAGMA user_version = 999")
    con.commit()
    con.close()
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), *FAST)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "evotui: error:" in proc.stderr


def test_resume_unknown_run(db):
    evotui("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", "1", *FAST)
    proc = evotui("resume", "r-nope", "--db", str(db), "--no-ui")
    assert proc.returncode == 2
    _one_clear_error(proc, "r-nope")


def test_run_without_no_ui_says_so(db):
    proc = evotui("run", "rules", "--db", str(db))
    assert proc.returncode == 2
    _one_clear_error(proc, "--no-ui")


@pytest.mark.parametrize("cmd", ["runs", "show"])
def test_inspect_missing_database(tmp_path, cmd):
    proc = evotui(cmd, "--db", str(tmp_path / "none.db"))
    assert proc.returncode == 2
    _one_clear_error(proc, "none.db")
