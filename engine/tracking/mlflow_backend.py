"""MLflow through its own client (MlflowClient, no fluent global state): one MLflow run per
evotui run, found again on resume by its `evotui.run_id` tag, so a killed and resumed run is
one continuous MLflow run. Imported only when [tracking.mlflow] is set."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from engine.tracking.base import MetricRow, RunIdentity

RUN_TAG = "evotui.run_id"
STATUS = {"completed": "FINISHED", "failed": "FAILED"}
"""evotui status -> MLflow run status; anything else (interrupted) is KILLED."""
PARAMS_PER_CALL = 100  # MLflow's log_batch limits
METRICS_PER_CALL = 1000


class MlflowBackend:
    name = "mlflow"

    def __init__(self, uri: str, experiment: str) -> None:
        self.uri = uri
        self.experiment = experiment
        self.client = None
        self.run_id: str | None = None

    def start(self, identity: RunIdentity) -> str:
        if self.uri.startswith("file:"):
            # MLflow 3 refuses its file store unless asked (it favours a database); a local file
            # store beside the evotui database is what [tracking.mlflow] without uri promises.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        self.client = client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name(self.experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(self.experiment)
        found = client.search_runs([exp_id], filter_string=f"tags.`{RUN_TAG}` = '{identity.run_id}'",
                                   order_by=["attributes.start_time ASC"], max_results=1)
        logged: Mapping[str, str] = {}
        if found:
            run = found[0]
            self.run_id = run.info.run_id
            client.update_run(self.run_id, status="RUNNING")
            logged = run.data.params
        else:
            run = client.create_run(exp_id, tags={RUN_TAG: identity.run_id, "evotui.task": identity.task},
                                    run_name=identity.run_id)
            self.run_id = run.info.run_id
        params, tags = [], []
        for key, value in identity.params.items():
            value = value[:MAX_PARAM_VAL_LENGTH]
            if key not in logged:
                params.append(Param(key, value))
            elif logged[key] != value:  # MLflow params are immutable: a resume's change is a tag
                tags.append(RunTag(f"evotui.resumed_with.{key}", value))
        for i in range(0, max(len(params), len(tags)), PARAMS_PER_CALL):
            client.log_batch(self.run_id, params=params[i:i + PARAMS_PER_CALL], tags=tags[i:i + PARAMS_PER_CALL])
        return self.run_id

    def log_metrics(self, rows: list[MetricRow]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(_key(r), r.value, r.t_ms, r.step) for r in rows]
        for i in range(0, len(metrics), METRICS_PER_CALL):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + METRICS_PER_CALL])

    def log_artifact(self, path: Path, name: str) -> None:
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path=name)
        else:
            self.client.log_artifact(self.run_id, str(path))

    def log_summary(self, summary: Mapping[str, float]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(f"evotui.summary.{k}", str(v)) for k, v in summary.items()])

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=STATUS.get(status, "KILLED"))


def _key(row: MetricRow) -> str:
    """Per-minute series apart from the per-proposal ones (MLflow has one step axis per key)."""
    return row.key if row.axis == "proposal" else f"per_minute/{row.key}"
