"""Evaluator of the Heilbronn task: smallest triangle area of 11 points in the unit square.

The program's run() returns the points (the initial program's run() returns points(), the
function inside its evolve block). combined_score is the smallest area divided by the best known
value for 11 points in the unit square, 1/27 = 0.037037 (Goldberg, 1972), so 1.0 equals the
record. The 0.0365 this task used before is AlphaEvolve's figure for 11 points in a triangle of
unit area, a different problem; against it Goldberg's configuration scored 1.0147.
"""

import importlib.util
import itertools

import numpy as np

N = 11
BEST_KNOWN = 1 / 27
"""Goldberg (1972): the largest smallest-triangle area known for 11 points in the unit square."""


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pts = np.asarray(module.run(), dtype=float)
    if pts.shape != (N, 2):
        return {"combined_score": 0.0, "feedback": f"expected an array of shape ({N}, 2), got {pts.shape}"}
    if not np.all(np.isfinite(pts)) or pts.min() < 0 or pts.max() > 1:
        return {"combined_score": 0.0, "feedback": "every point must be finite and inside the unit square"}
    triples = np.array(list(itertools.combinations(range(N), 3)))
    a, b, c = pts[triples[:, 0]], pts[triples[:, 1]], pts[triples[:, 2]]
    areas = 0.5 * np.abs((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1]))
    k = int(np.argmin(areas))
    smallest = float(areas[k])
    return {
        "combined_score": smallest / BEST_KNOWN,
        "min_area": smallest,
        "feedback": f"smallest triangle is points {tuple(int(x) for x in triples[k])} with area {smallest:.5f}",
    }
