"""Candidates in other languages: markers, regions, syntax pre-checks, loaders, prompts, a CLI run.

The evaluators here are Python and read the candidate's source (no compiler is needed in CI).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from engine.code.evolve_blocks import RegionError, check_syntax, find_regions
from engine.code.filters import ProgramFilters
from engine.code.languages import LANGUAGES, UnknownLanguage, by_fence, by_name, by_suffix, grammar
from engine.code.patches import apply_reply
from engine.llm.sim import program_model
from engine.stages import program_prompt as prompt
from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError
from tests.e2e.conftest import FAST, evotui, summary_of

RUST = '''// A Rust candidate; the evaluator reads its constants.
use std::f64::consts::PI;

// EVOLVE-BLOCK-START
const WIDTH: f64 = 0.25;
const HEIGHT: f64 = 0.5;
fn area() -> f64 {
    let _label = "// EVOLVE-BLOCK-END is only text here";
    WIDTH * HEIGHT
}
// EVOLVE-BLOCK-END

fn main() {
    println!("{}", area() * PI);
}
'''

CPP = '''#include <cstdio>
// EVOLVE-BLOCK-START
double scale() { return 0.5; }
// EVOLVE-BLOCK-END
int main() { const char* s = "// EVOLVE-BLOCK-START"; std::printf("%s %f\\n", s, scale()); }
'''

GO = '''package main

import "fmt"

// EVOLVE-BLOCK-START
func step() float64 { return 0.5 }
// EVOLVE-BLOCK-END

func main() { fmt.Println(step(), "// EVOLVE-BLOCK-END") }
'''

JULIA = '''# Julia candidate
# EVOLVE-BLOCK-START
function step()
    s = "# EVOLVE-BLOCK-END"
    return 0.5
end
# EVOLVE-BLOCK-END
println(step())
'''

R = '''x <- c(1, 2, 3)
# EVOLVE-BLOCK-START
fit <- function(x) {
  mean(x) * 0.5
}
# EVOLVE-BLOCK-END
print(fit(x))
'''

FORTRAN = '''program main
  implicit none
  real :: a
  ! EVOLVE-BLOCK-START
  a = 0.5
  ! EVOLVE-BLOCK-END
  print *, a
end program main
'''

EVALUATOR = '''"""Scores a Rust candidate without compiling it: its constants are read from the source."""
import re


def evaluate(program_path):
    if not program_path.endswith(".rs"):
        raise ValueError(f"expected a .rs candidate, got {program_path}")
    src = open(program_path, encoding="utf-8").read()
    if src.count("{") != src.count("}"):
        return {"combined_score": 0.0, "error": "unbalanced braces"}
    consts = dict(re.findall(r"const (\\w+): f64 = ([0-9.]+);", src))
    w, h = float(consts["WIDTH"]), float(consts["HEIGHT"])
    return {"combined_score": 1.0 / (1.0 + (w - 0.7) ** 2 + (h - 0.9) ** 2), "width": w, "height": h}
'''


@pytest.mark.parametrize("name,text,lines", [
    ("rust", RUST, [(4, 11)]), ("cpp", CPP, [(2, 4)]), ("go", GO, [(5, 7)]), ("julia", JULIA, [(2, 7)]),
    ("r", R, [(2, 6)]), ("fortran", FORTRAN, [(4, 6)]),
])
def test_markers_and_regions_in_each_language(name, text, lines):
    regions = find_regions(text, name)
    assert [(r.start_line, r.end_line) for r in regions] == lines
    assert check_syntax(text, name) is None


def test_every_packaged_grammar_loads():
    with_grammar = [spec.name for spec in LANGUAGES if grammar(spec) is not None]
    assert {"python", "rust", "cpp", "c", "go", "julia", "fortran"} <= set(with_grammar)
    assert grammar(by_name("r")) is None


def test_a_marker_inside_a_string_literal_is_not_a_marker():
    # Each sample quotes a marker in a string; with a grammar only comment nodes count.
    assert len(find_regions(RUST, "rust")) == 1
    assert len(find_regions(CPP, "cpp")) == 1
    assert len(find_regions(GO, "go")) == 1
    assert len(find_regions(JULIA, "julia")) == 1


def test_python_markers_do_not_count_in_rust_and_unpaired_markers_name_the_line():
    assert find_regions("# EVOLVE-BLOCK-START\nfn f() {}\n# EVOLVE-BLOCK-END\n", "rust") == []
    with pytest.raises(RegionError, match="line 2"):
        find_regions("fn f() {}\n// EVOLVE-BLOCK-START\nfn g() {}\n", "rust")


def test_syntax_pre_check_finds_the_error_in_broken_rust():
    broken = RUST.replace("WIDTH * HEIGHT", "WIDTH * * HEIGHT;;}")
    problem = check_syntax(broken, "rust")
    assert problem is not None and "rust" in problem.message and problem.line >= 7
    assert check_syntax("int main() { return 0 }\n", "cpp") is not None
    assert check_syntax(R.replace("{", ""), "r") is None  # no grammar: the evaluator decides


def test_language_lookup():
    assert by_suffix(".rs").name == "rust" and by_suffix(".R").name == "r" and by_suffix(".cc").name == "cpp"
    assert by_name("C++").name == "cpp" and by_fence("rust").name == "rust"
    with pytest.raises(UnknownLanguage, match="known:"):
        by_suffix(".zzz")


def test_patches_and_filters_use_the_language_markers():
    reply = "<<<<<<< SEARCH\nconst WIDTH: f64 = 0.25;\n=======\nconst WIDTH: f64 = 0.3;\n>>>>>>> REPLACE\n"
    res = apply_reply(RUST, reply, "diff", by_name("rust"))
    assert res.ok and "0.3;" in res.text
    outside = "<<<<<<< SEARCH\nuse std::f64::consts::PI;\n=======\nuse std::f64::consts::E;\n>>>>>>> REPLACE\n"
    res = apply_reply(RUST, outside, "diff", "rust")
    assert not res.ok and "outside the EVOLVE-BLOCK" in res.errors[0]
    full = apply_reply(RUST, f"```rust\n{RUST.replace('0.5', '0.6')}```", "full", "rust")
    assert full.ok
    filters = ProgramFilters(language=by_name("rust"))
    assert filters.check(RUST, RUST.replace("0.5;", "0.5;;}")).kind == "syntax"
    assert filters.check(RUST, RUST.replace("0.5", "0.6")).passed


def test_a_grammar_gap_the_parent_shares_is_left_to_the_evaluator():
    parent = RUST.replace("fn main() {", "fn main() { @@;")  # flagged by the grammar already
    assert check_syntax(parent, "rust") is not None
    filters = ProgramFilters(language=by_name("rust"))
    assert filters.check(parent, parent.replace("0.25", "0.3")).passed


def test_prompt_fences_with_the_language_and_the_simulator_answers_in_it():
    rust = by_name("rust")
    system = prompt.system_message("", "diff", rust)
    assert "// EVOLVE-BLOCK-START" in system and "rust" in system
    messages = prompt.build_messages(system=system, description="", parent_id="a1", parent_code=RUST,
                                     parent_score=0.5, metrics={}, feedback={}, last_change="", others=[],
                                     failures=[], fmt="diff", max_chars=20000, language=rust)
    assert "```rust\n" in messages[1]["content"]
    applied = 0
    for seed in range(40):
        reply = program_model.propose(messages, str, random.Random(seed))
        res = apply_reply(RUST, reply, "diff", rust)
        applied += res.ok
        if res.ok:
            assert find_regions(res.text, rust) and "// EVOLVE-BLOCK-START" in res.text
    assert applied >= 25
    full = prompt.system_message("", "full", rust)
    reply = program_model.propose([{"role": "system", "content": full}, messages[1]], str, random.Random(1))
    assert "```rust" in reply and apply_reply(RUST, reply, "full", rust).ok


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_openevolve_folder_with_a_rust_candidate_loads(tmp_path):
    folder = _write(tmp_path / "rust_task", {"initial_program.rs": RUST, "evaluator.py": EVALUATOR,
                                             "config.yaml": "language: rust\nfile_suffix: .rs\n"})
    task = load_any_task(str(folder))
    assert task.language.name == "rust" and task.program_name == "program.rs"
    assert not any("language" in w or "file_suffix" in w for w in task.warnings)


def test_language_from_the_suffix_and_clear_errors(tmp_path):
    r_task = load_any_task(str(_write(tmp_path / "r", {"initial_program.r": R, "evaluator.py": EVALUATOR})))
    assert r_task.language.name == "r" and r_task.program_name == "program.r"
    missing = _write(tmp_path / "m", {"initial_program.rs": RUST, "evaluator.py": EVALUATOR,
                                      "config.yaml": "file_suffix: .cpp\n"})
    with pytest.raises(TaskError, match="initial_program.cpp"):
        load_any_task(str(missing))
    two = _write(tmp_path / "two", {"initial_program.rs": RUST, "initial_program.go": GO, "evaluator.py": EVALUATOR})
    with pytest.raises(TaskError, match="set language"):
        load_any_task(str(two))


@pytest.mark.parametrize("name,text,lang", [("initial.jl", JULIA, "julia"), ("initial.go", GO, "go")])
def test_shinka_folder_with_a_julia_or_go_candidate_loads(tmp_path, name, text, lang):
    folder = _write(tmp_path / lang, {name: text, "evaluate.py": "print('scored')\n"})
    task = load_any_task(str(folder))
    assert task.format == "shinka" and task.language.name == lang
    assert task.program_name == "main" + Path(name).suffix and find_regions(task.initial_program, task.language)


def test_rust_candidate_with_a_python_evaluator_runs_end_to_end(tmp_path):
    folder = _write(tmp_path / "rust_task", {"initial_program.rs": RUST, "evaluator.py": EVALUATOR,
                                             "config.yaml": "language: rust\nfile_suffix: .rs\n"})
    db = tmp_path / "x.db"
    proc = evotui("run", str(folder), "--no-ui", "--max-proposals", "5", *FAST, "--db", str(db), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["status"] == "completed" and s["proposal_attempts"] == 5
    assert s["best_score"] >= s["seed_score"] > 0
    con = sqlite3.connect(db)
    texts = [t for (t,) in con.execute("SELECT text FROM artifacts")]
    con.close()
    children = [t for t in texts if t != RUST]
    assert children, "no proposal was evaluated and kept"
    assert all("// EVOLVE-BLOCK-START" in t and find_regions(t, "rust") for t in children)


def test_systemverilog_and_wolfram_markers_are_found_line_by_line() -> None:
    from engine.code.evolve_blocks import find_regions
    from engine.code.languages import by_suffix

    sv = "module m;\n// EVOLVE-BLOCK-START\nassign y = a & b;\n// EVOLVE-BLOCK-END\nendmodule\n"
    wl = "f[x_] := x\n(* EVOLVE-BLOCK-START *)\ng[x_] := 2 x\n(* EVOLVE-BLOCK-END *)\n"
    for text, suffix in ((sv, ".sv"), (wl, ".wl")):
        regions = find_regions(text, by_suffix(suffix))
        assert len(regions) == 1 and text[regions[0].start:regions[0].end].count("\n") == 1
