"""Heilbronn problem: 11 points in the unit square, maximise the smallest triangle area."""

import numpy as np


# EVOLVE-BLOCK-START
def points():
    """A jittered grid start: several nearly collinear triples, so the smallest triangle is tiny."""
    coords = [
        (0.10, 0.12),
        (0.50, 0.09),
        (0.90, 0.13),
        (0.11, 0.50),
        (0.52, 0.47),
        (0.88, 0.52),
        (0.09, 0.90),
        (0.48, 0.91),
        (0.90, 0.88),
        (0.30, 0.27),
        (0.72, 0.69),
    ]
    return np.clip(np.array(coords, dtype=float), 0.0, 1.0)
# EVOLVE-BLOCK-END


def run():
    return points()
