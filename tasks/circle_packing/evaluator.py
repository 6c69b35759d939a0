"""Evaluator of the circle packing task: validates the packing and scores the sum of radii."""

import importlib.util

import numpy as np

N = 26
TOL = 1e-9
REFERENCE = 2.635983
"""The best sum of radii known for 26 circles, reached by several systems (AlphaEvolve reported 2.635)."""


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluate(program_path):
    module = _load(program_path)
    centers, radii, _ = module.run_packing()
    centers = np.asarray(centers, dtype=float)
    radii = np.asarray(radii, dtype=float)
    if centers.shape != (N, 2) or radii.shape != (N,):
        return {"combined_score": 0.0, "validity": 0.0,
                "feedback": f"expected centers of shape ({N}, 2) and {N} radii, got {centers.shape} and {radii.shape}"}
    if not (np.all(np.isfinite(centers)) and np.all(np.isfinite(radii))):
        return {"combined_score": 0.0, "validity": 0.0, "feedback": "centers or radii contain NaN or inf"}
    if np.any(radii < 0):
        return {"combined_score": 0.0, "validity": 0.0, "feedback": f"circle {int(np.argmin(radii))} has a negative radius"}
    lo = np.min(centers - radii[:, None])
    hi = np.max(centers + radii[:, None])
    if lo < -TOL or hi > 1 + TOL:
        k = int(np.argmax(np.maximum(radii[:, None] - centers, centers + radii[:, None] - 1).max(axis=1)))
        return {"combined_score": 0.0, "validity": 0.0, "feedback": f"circle {k} sticks out of the unit square"}
    diff = centers[:, None, :] - centers[None, :, :]
    dist = np.sqrt((diff ** 2).sum(-1))
    gap = dist - (radii[:, None] + radii[None, :])
    np.fill_diagonal(gap, np.inf)
    if gap.min() < -TOL:
        i, j = np.unravel_index(int(np.argmin(gap)), gap.shape)
        return {"combined_score": 0.0, "validity": 0.0,
                "feedback": f"circles {i} and {j} overlap by {-gap.min():.4g}"}
    total = float(radii.sum())
    small = int(np.sum(radii < 0.02))
    return {
        "combined_score": total,
        "sum_radii": total,
        "target_ratio": total / REFERENCE,
        "validity": 1.0,
        "min_radius": float(radii.min()),
        "feedback": f"valid packing, sum of radii {total:.4f} ({total / REFERENCE:.1%} of {REFERENCE}); "
                    f"{small} circle(s) have radius below 0.02",
    }
