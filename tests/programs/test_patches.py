"""Patches: tolerant matching, EVOLVE-BLOCK enforcement, markers, functions, formats, filters."""

from __future__ import annotations

import string

from hypothesis import given, settings, strategies as st

from engine.code.evolve_blocks import check_syntax, find_functions, find_regions, syntax_hints
from engine.code.filters import ProgramFilters
from engine.code.patches import apply_blocks, apply_reply, parse_search_replace, unified_diff, Block

PROGRAM = '''import math

HELP = "# EVOLVE-BLOCK-START is how a block starts"


# EVOLVE-BLOCK-START
def solve(x):
    scale = 1.5
    if x > 0:
        total = scale * x
        return total
    return 0.0
# EVOLVE-BLOCK-END


def main():
    return solve(2)
'''


def sr(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_markers_in_strings_are_not_markers():
    regions = find_regions(PROGRAM)
    assert len(regions) == 1
    assert (regions[0].start_line, regions[0].end_line) == (6, 13)
    assert PROGRAM[regions[0].start:regions[0].end].startswith("def solve")


def test_marker_errors_name_the_line():
    bad = "# EVOLVE-BLOCK-START\nx = 1\n"
    try:
        find_regions(bad)
    except ValueError as exc:
        assert "line 1" in str(exc) and "without a matching" in str(exc)
    else:
        raise AssertionError("unbalanced markers accepted")


def test_decorated_and_async_functions_are_located():
    src = "import functools\n\n@functools.cache\n@other\nasync def fetch(a):\n    return a\n\nclass K:\n    def m(self):\n        pass\n"
    fns = {f.name: f for f in find_functions(src)}
    assert fns["fetch"].is_async and fns["fetch"].decorated
    assert fns["fetch"].start_line == 3 and fns["fetch"].end_line == 6
    assert src[fns["fetch"].start:].startswith("@functools.cache")
    assert not fns["m"].is_async and not fns["m"].decorated


def test_syntax_check_positions():
    problem = check_syntax("def broken(:\n    pass\n")
    assert problem is not None and problem.line == 1
    hints = syntax_hints("def broken(:\n    pass\n")
    assert hints and hints[0].line == 1
    assert check_syntax(PROGRAM) is None


def test_exact_and_multiple_blocks():
    reply = "Reason.\n" + sr("    scale = 1.5", "    scale = 2.5") + "\n" + sr("    return 0.0", "    return -1.0")
    res = apply_reply(PROGRAM, reply, "diff")
    assert res.ok and res.applied == 2 and res.tolerant == 0
    assert "scale = 2.5" in res.text and "return -1.0" in res.text


@settings(max_examples=60, deadline=None)
@given(shift=st.integers(min_value=-4, max_value=8), trailing=st.text(" \t", max_size=3),
       spaces=st.integers(min_value=1, max_value=3), blank=st.booleans())
def test_tolerant_matching_property(shift, trailing, spaces, blank):
    """Indentation shifts, trailing whitespace, inner spacing and blank lines still match, and the
    replacement lands with the program's own indentation."""
    lines = ["    if x > 0:", "        total = scale * x", "        return total"]
    def mangle(line: str) -> str:
        body = line.lstrip()
        ind = max(0, len(line) - len(body) + shift)
        return " " * ind + body.replace(" = ", " " * spaces + "=" + " " * spaces) + trailing
    search = [mangle(ln) for ln in lines]
    if blank:
        search.insert(1, "")
    replace = [mangle("    if x > 0:"), mangle("        total = scale * x * 2"), mangle("        return total")]
    res = apply_reply(PROGRAM, sr("\n".join(search), "\n".join(replace)), "diff")
    assert res.ok, res.errors
    assert "\n        total = scale * x * 2" in res.text.replace(" " * spaces + "=" + " " * spaces, " = ")
    assert check_syntax(res.text) is None


@settings(max_examples=40, deadline=None)
@given(line_no=st.sampled_from([0, 2, 15, 16]), suffix=st.text(string.ascii_letters, min_size=1, max_size=5))
def test_edits_outside_the_block_are_rejected(line_no, suffix):
    line = PROGRAM.splitlines()[line_no]
    res = apply_reply(PROGRAM, sr(line, line + "  # " + suffix), "diff")
    assert not res.ok
    assert "outside the EVOLVE-BLOCK" in res.errors[0] and "block 1" in res.errors[0]
    assert res.region_violations == 1


def test_block_adding_markers_rejected():
    res = apply_reply(PROGRAM, sr("    scale = 1.5", "    scale = 1.5\n# EVOLVE-BLOCK-END"), "diff")
    assert not res.ok and "markers" in res.errors[0]


def test_precise_per_block_errors():
    reply = (sr("    scale = 1.55", "    scale = 2") + "\n" + sr("    return total", "    return total")
             + "\n<<<<<<< SEARCH\n    x = 1\n>>>>>>> REPLACE\n")
    blocks, errors = parse_search_replace(reply)
    assert len(blocks) == 2 and len(errors) == 1 and errors[0].startswith("block 3: no =======")
    res = apply_reply(PROGRAM, reply, "diff")
    assert not res.ok
    assert any(e.startswith("block 1: SEARCH text not found") and "closest lines are 8-8" in e for e in res.errors)
    assert any(e.startswith("block 3") for e in res.errors)


def test_ambiguous_search():
    src = PROGRAM.replace("    return 0.0", "    total = 1\n    return 0.0")
    res = apply_blocks(src, [Block(1, "total", "grand_total")])
    assert not res.ok and "matches" in res.errors[0] and "places" in res.errors[0]


def test_unified_diff_and_full_rewrite():
    child = PROGRAM.replace("scale = 1.5", "scale = 3.0")
    diff = unified_diff(PROGRAM, child)
    res = apply_reply(PROGRAM, f"Change.\n```diff\n{diff}```", "udiff")
    assert res.ok and res.text == child
    assert apply_reply(PROGRAM, f"```python\n{child}```", "full").text == child
    bad = apply_reply(PROGRAM, f"```python\n{child.replace('solve(2)', 'solve(3)')}```", "full")
    assert not bad.ok and "after EVOLVE-BLOCK-END" in bad.errors[0]
    assert "no @@ hunks" in apply_reply(PROGRAM, "nothing", "udiff").errors[0]


def test_no_markers_means_whole_file_editable():
    src = "x = 1\ny = 2\n"
    res = apply_reply(src, sr("y = 2", "y = 3"), "diff")
    assert res.ok and res.text == "x = 1\ny = 3\n"


def test_filters_count_each_kind():
    f = ProgramFilters()
    f.remember(PROGRAM)
    child = PROGRAM.replace("scale = 1.5", "scale = 2.0")
    assert f.check(PROGRAM, PROGRAM + "\n\n").kind == "no_op"
    assert f.check(PROGRAM, child).passed
    f.remember(child)
    assert f.check(PROGRAM, child).kind == "duplicate"
    assert f.check(PROGRAM, PROGRAM.replace("scale = 1.5", "scale = (")).kind == "syntax"
    assert f.check(PROGRAM, PROGRAM.replace("solve(2)", "solve(5)")).kind == "region"
    assert dict(f.counts) == {"no_op": 1, "duplicate": 1, "syntax": 1, "region": 1} and f.passed == 1
