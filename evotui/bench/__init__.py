"""The benchmarks: `evotui bench` (run.py: modes side by side), its suites (suite.py), the real
peers as rows (peers.py), best-of-N (bestofn.py), the TUI and database benches (ui.py, db.py),
the Python API bench (optimize.py) and the real-server check (real.py, sim_check.py).

Kept empty on purpose: the CLI imports `evotui.bench.modes` for its help text, and a package
body that loaded the engine made every `evotui` start-up pay for it.
"""
