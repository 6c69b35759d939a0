"""Held-out evaluator of the circle packing task (`evotui analyze` only; runs never see it).

Same score as evaluator.py (the sum of radii of a valid packing, 0 otherwise), checked in ways a
program tuned against that evaluator could slip past:
- strict tolerance: containment and overlaps within 1e-12 (evaluator.py allows 1e-9, so radii
  inflated into that slack are caught);
- independent arithmetic: every check is plain Python on floats copied out of the arrays, with
  math.fsum, so a program that changes numpy's functions cannot change the verdict;
- reproducibility: run_packing() is called twice and must give the same packing (a score that
  depends on an unseeded draw is not a result).
"""

import importlib.util
import math

N = 26
TOL = 1e-12


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_heldout", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _floats(value):
    out = value.tolist() if hasattr(value, "tolist") else list(value)
    return [[float(v) for v in row] if isinstance(row, (list, tuple)) else float(row) for row in out]


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "feedback": reason}


def evaluate(program_path):
    module = _load(program_path)
    first = module.run_packing()
    second = module.run_packing()
    centers, radii = _floats(first[0]), _floats(first[1])
    if (centers, radii) != (_floats(second[0]), _floats(second[1])):
        return _invalid("run_packing() gave two different packings; the result is not reproducible")
    if len(centers) != N or len(radii) != N or any(not isinstance(c, list) or len(c) != 2 for c in centers):
        return _invalid(f"expected {N} centres (x, y) and {N} radii")
    if not all(math.isfinite(v) for v in [*radii, *(x for c in centers for x in c)]):
        return _invalid("centers or radii contain NaN or inf")
    for k, ((x, y), r) in enumerate(zip(centers, radii)):
        if r < 0:
            return _invalid(f"circle {k} has a negative radius")
        if x - r < -TOL or y - r < -TOL or x + r > 1 + TOL or y + r > 1 + TOL:
            return _invalid(f"circle {k} sticks out of the unit square (tolerance {TOL:g})")
    for i in range(N):
        for j in range(i + 1, N):
            dx, dy = centers[i][0] - centers[j][0], centers[i][1] - centers[j][1]
            gap = math.hypot(dx, dy) - (radii[i] + radii[j])
            if gap < -TOL:
                return _invalid(f"circles {i} and {j} overlap by {-gap:.3g} (tolerance {TOL:g})")
    total = math.fsum(radii)
    return {"combined_score": total, "validity": 1.0, "feedback": f"valid under the held-out checks, sum {total:.6f}"}
