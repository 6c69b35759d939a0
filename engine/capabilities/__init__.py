"""Pipeline capabilities composed per run from the mode table and the strategy (ARCHITECTURE §12):
each one module with a small contract a task kind calls at fixed points of its stages."""
