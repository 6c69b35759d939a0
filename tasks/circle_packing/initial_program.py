"""Circle packing: 26 circles in the unit square, maximise the sum of radii."""

import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    """Place 26 centres on a staggered grid and give each the largest radius that fits."""
    n = 26
    cols = 7
    spacing_x = 0.1
    spacing_y = 0.1
    offset_x = 0.1
    offset_y = 0.1
    stagger = 0.0
    centers = np.zeros((n, 2))
    for i in range(n):
        row, col = divmod(i, cols)
        x = offset_x + col * spacing_x + (stagger if row % 2 else 0.0)
        y = offset_y + row * spacing_y
        centers[i] = [x, y]
    centers = np.clip(centers, 0.01, 0.99)
    radii = compute_max_radii(centers)
    return centers, radii


def compute_max_radii(centers):
    """Largest radii such that every circle stays in the square and no two overlap."""
    n = centers.shape[0]
    radii = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    for i in range(n):
        for j in range(i + 1, n):
            d = float(np.hypot(*(centers[i] - centers[j])))
            if radii[i] + radii[j] > d:
                scale = d / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii
# EVOLVE-BLOCK-END


def run_packing():
    centers, radii = construct_packing()
    return centers, radii, float(np.sum(radii))
