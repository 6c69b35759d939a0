"""Held-out evaluator of the Heilbronn task (`evotui analyze` and the bench suite; runs never see it).

Same score as evaluator.py (the smallest triangle area over 1/27, Goldberg's 1972 value for 11
points in the unit square), checked in ways a program tuned against that evaluator could slip past:
- exact arithmetic: the points are read as exact fractions of their float values and every area
  is computed with fractions.Fraction, so no rounding (and no patched numpy) can turn a
  degenerate triple into a positive area;
- the square is closed but strict: a coordinate outside [0, 1] by any amount is invalid;
- reproducibility: run() is called twice and must give the same points.
"""

import importlib.util
import itertools
import math
from fractions import Fraction

N = 11
BEST_KNOWN = Fraction(1, 27)


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "feedback": reason}


def _points(value):
    rows = value.tolist() if hasattr(value, "tolist") else list(value)
    return [[float(v) for v in row] for row in rows]


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_heldout", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first, second = _points(module.run()), _points(module.run())
    if first != second:
        return _invalid("run() gave two different point sets; the result is not reproducible")
    if len(first) != N or any(len(p) != 2 for p in first):
        return _invalid(f"expected {N} points (x, y)")
    if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for p in first for v in p):
        return _invalid("every coordinate must be a finite number in [0, 1]")
    exact = [(Fraction(x), Fraction(y)) for x, y in first]
    smallest = min(abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])) / 2
                   for a, b, c in itertools.combinations(exact, 3))
    return {"combined_score": float(smallest / BEST_KNOWN), "validity": 1.0, "min_area": float(smallest),
            "feedback": f"valid under the held-out checks, smallest area {float(smallest):.6f}"}
