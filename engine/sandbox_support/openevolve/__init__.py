"""evotui's sandbox-only shim of the parts of OpenEvolve that evaluators import."""
