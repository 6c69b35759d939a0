"""Experiment tracking: a run's config, metrics and artifacts logged to MLflow and/or W&B.

Off the engine's hot path: an observer of the event bus (session.py) turns snapshots into
metric rows and hands them to one background thread per tracker (worker.py), which batches
them into the library's calls. mlflow and wandb are imported only when [tracking] names them;
a tracker that fails is a warning and a counted failure, never the end of the run.
"""
