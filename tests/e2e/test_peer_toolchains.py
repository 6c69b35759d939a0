"""Candidates in the compiled languages of the ShinkaEvolve examples (Fortran, Go, SystemVerilog,
Rust) run unchanged under evotui with toolchains from Debian packages (issue 35): a
ShinkaEvolve-format folder (initial.<ext> + evaluate.py that compiles and runs it) scores its
seed inside the sandbox and a short simulated run evaluates children too. .ci/run installs
gfortran, golang-go and iverilog when apt-get works; a test whose toolchain is absent skips and
says which package brings it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, evotui, summary_of

# The evaluate.py every folder shares: build and run the candidate, read one number, score it.
EVALUATE = '''
import argparse, json, os, subprocess, sys
ap = argparse.ArgumentParser()
ap.add_argument("--program_path"); ap.add_argument("--results_dir")
a = ap.parse_args()
os.makedirs(a.results_dir, exist_ok=True)
build = os.path.join(a.results_dir, "build")
os.makedirs(build, exist_ok=True)
env = {**os.environ, "BUILD": build, "SRC": os.path.abspath(a.program_path)}
def done(correct, error, score=0.0):
    json.dump({"combined_score": score}, open(os.path.join(a.results_dir, "metrics.json"), "w"))
    json.dump({"correct": correct, "error": error}, open(os.path.join(a.results_dir, "correct.json"), "w"))
    sys.exit(0)
p = subprocess.run(["sh", "-c", RUN], env=env, capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    done(False, (p.stderr or p.stdout)[-500:])
try:
    x = float(p.stdout.split()[-1])
except (ValueError, IndexError):
    done(False, "no number printed: " + p.stdout[-200:])
done(True, None, 1.0 / (1.0 + abs(x - 7.0)))
'''

LANGUAGES = {
    "fortran": ("gfortran", "gfortran", ".f90",
                "program main\n  implicit none\n  real :: x\n  ! EVOLVE-BLOCK-START\n  x = 2.0\n"
                "  ! EVOLVE-BLOCK-END\n  print *, x\nend program main\n",
                'gfortran -o "$BUILD/prog" "$SRC" && "$BUILD/prog"'),
    "go": ("go", "golang-go", ".go",
           'package main\n\nimport "fmt"\n\nfunc main() {\n\t// EVOLVE-BLOCK-START\n\tx := 2.0\n'
           '\t// EVOLVE-BLOCK-END\n\tfmt.Println(x)\n}\n',
           'cp "$SRC" "$BUILD/main.go" && go run "$BUILD/main.go"'),
    "systemverilog": ("iverilog", "iverilog", ".sv",
                      "module top;\n  integer x;\n  initial begin\n    // EVOLVE-BLOCK-START\n    x = 2;\n"
                      '    // EVOLVE-BLOCK-END\n    $display("%0d", x);\n  end\nendmodule\n',
                      'iverilog -g2012 -o "$BUILD/sim" "$SRC" && vvp -n "$BUILD/sim" | grep -v "^VCD"'),
    "rust": ("rustc", "rustc", ".rs",
             'fn main() {\n    // EVOLVE-BLOCK-START\n    let x: f64 = 2.0;\n    // EVOLVE-BLOCK-END\n'
             '    println!("{}", x);\n}\n',
             'rustc -O -o "$BUILD/prog" "$SRC" && "$BUILD/prog"'),
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_a_compiled_candidate_scores_its_seed_and_evolves(tmp_path: Path, language: str) -> None:
    tool, package, suffix, initial, run = LANGUAGES[language]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (Debian package {package}; .ci/run installs it when apt-get works)")
    folder = tmp_path / f"{language}_task"
    folder.mkdir()
    (folder / f"initial{suffix}").write_text(initial)
    (folder / "evaluate.py").write_text(f"RUN = {run!r}\n" + EVALUATE)
    proc = evotui("run", str(folder), "--llm", "sim", "--no-ui", "--max-proposals", "4", "--seed", "2",
                  "--db", str(tmp_path / "r.db"), *FAST, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["seed_score"] == pytest.approx(1.0 / 6.0), s  # 2 printed, 7 wanted: the toolchain ran
    assert s["proposal_attempts"] == 4 and s["status"] == "completed", s
