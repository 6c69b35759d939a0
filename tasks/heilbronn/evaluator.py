"""Evaluator of the Heilbronn task: smallest triangle area of 11 points in the unit square."""

import importlib.util
import itertools

import numpy as np

N = 11
BEST_KNOWN = 0.0365


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
