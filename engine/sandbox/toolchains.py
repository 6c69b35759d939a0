"""The user's toolchains inside the sandbox: read-only where they are, whatever HOME says.

Evaluations run with HOME set to their scratch directory, so a toolchain that looks for itself
under the home directory (rustup, cargo, go, julia, elan, ...) would vanish. Each known toolchain
variable is passed through when the engine's environment sets it, or set to the default location
when that exists under the real home; its directories join the readable paths (reads are
confined, engine/sandbox/readable.py) and stay read-only. Where a tool must write into its home
(cargo's package cache, julia's compile cache, go's build cache) the write goes to scratch:
CARGO_HOME and GOCACHE point there with the real ones readable, JULIA_DEPOT_PATH stacks a scratch
depot in front of the real one.
"""

from __future__ import annotations

import os
from pathlib import Path

TOOL_HOMES = {
    "RUSTUP_HOME": ".rustup",
    "CARGO_HOME": ".cargo",
    "GOPATH": "go",
    "GOROOT": None,
    "GOMODCACHE": None,
    "JULIA_DEPOT_PATH": ".julia",
    "ELAN_HOME": ".elan",
    "GHCUP_INSTALL_BASE_PREFIX": None,
    "JAVA_HOME": None,
    "SDKMAN_DIR": ".sdkman",
    "NVM_DIR": ".nvm",
    "BUN_INSTALL": ".bun",
    "DENO_DIR": None,
    "CONDA_PREFIX": None,
    "R_LIBS_USER": None,
    "CUDA_HOME": None,
}
"""Variable -> its default under the home directory (None: only when the environment sets it)."""
HOME_BIN_DIRS = (".local/bin", ".cargo/bin", "go/bin", ".elan/bin", ".juliaup/bin", ".bun/bin", ".ghcup/bin")
"""Folders of the real home that PATH may name: readable so the binaries there run."""


def toolchain_env(base: dict[str, str], scratch: str) -> tuple[dict[str, str], list[str]]:
    """(variables for the evaluation's environment, paths to make readable)."""
    home = base.get("HOME") or str(Path.home())
    env: dict[str, str] = {}
    readable: list[str] = []
    for var, default in TOOL_HOMES.items():
        value = base.get(var) or (os.path.join(home, default) if default else "")
        paths = [p for p in value.split(os.pathsep) if p and os.path.exists(p)]
        if not paths:
            continue
        env[var] = os.pathsep.join(paths)
        readable.extend(paths)
    if "CARGO_HOME" in env:
        # cargo locks and caches packages under CARGO_HOME; the real one stays readable for its binaries.
        env["CARGO_HOME"] = os.path.join(scratch, ".cargo-home")
    if "JULIA_DEPOT_PATH" in env:
        env["JULIA_DEPOT_PATH"] = os.pathsep.join([os.path.join(scratch, ".julia-depot"), env["JULIA_DEPOT_PATH"]])
    if "GOPATH" in env or "GOROOT" in env:
        env.setdefault("GOCACHE", os.path.join(scratch, ".go-cache"))
    for entry in base.get("PATH", "").split(os.pathsep):
        if entry and any(entry == os.path.join(home, d) for d in HOME_BIN_DIRS) and os.path.isdir(entry):
            readable.append(entry)
    return env, list(dict.fromkeys(readable))
