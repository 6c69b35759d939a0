"""evotui's stand-in for the `shinka` package, on the evaluator sandbox's sys.path only.

ShinkaEvolve evaluators (`evaluate.py --program_path P --results_dir D`) usually call
`shinka.core.run_shinka_eval`; this provides that helper so they run unchanged without
installing ShinkaEvolve and its dependencies. Nothing else of shinka is provided: an import of any
other part fails with a message naming what is missing (see evotui_sandbox_eval.py).
"""
