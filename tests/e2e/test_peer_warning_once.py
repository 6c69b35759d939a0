"""The ignored-keys warning of an OpenEvolve config.yaml prints once (issue 35, item 6), also when
the folder's own config.yaml is passed again with --config (as OpenEvolve's own command line has
users do); a different --config file still gets its own warning."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import evotui, summary_of

CONFIG = ("checkpoint_interval: 5\ndatabase:\n  num_islands: 3\n"
          "evaluator:\n  timeout: 30\n  cascade_evaluation: false\n")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "oe"
    folder.mkdir()
    (folder / "initial_program.py").write_text("# EVOLVE-BLOCK-START\nX = 1.0\n# EVOLVE-BLOCK-END\n")
    (folder / "evaluator.py").write_text(
        "import importlib.util\n"
        "def evaluate(program_path):\n"
        "    spec = importlib.util.spec_from_file_location('p', program_path)\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "    return {'combined_score': 1.0 / (1.0 + abs(m.X - 3.0))}\n")
    (folder / "config.yaml").write_text(CONFIG)
    return folder


def _ignored_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "warning:" in ln and "ignored:" in ln]


def test_the_folders_config_given_again_with_config_warns_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    proc = evotui("run", str(folder), "--config", str(folder / "config.yaml"), "--llm", "sim", "--no-ui",
                  "--max-proposals", "1", "--time-scale", "2000", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary_of(proc)
    lines = _ignored_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "checkpoint_interval" in lines[0] and "database.num_islands" in lines[0]


def test_another_config_file_keeps_its_own_warning(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    other = tmp_path / "phase2.yaml"
    other.write_text("log_level: INFO\n")
    proc = evotui("run", str(folder), "--config", str(other), "--llm", "sim", "--no-ui",
                  "--max-proposals", "1", "--time-scale", "2000", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _ignored_lines(proc.stderr)
    assert len(lines) == 2, proc.stderr
    assert any(ln.count("phase2.yaml: ignored: log_level") for ln in lines)
    assert any("config.yaml: ignored: checkpoint_interval" in ln for ln in lines)
