"""[tracking] of the run config: which experiment trackers a run logs to (engine/tracking).

Kept apart from the trackers themselves so that reading a config never imports mlflow or wandb.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from engine.config.service import StrictModel


class MlflowConfig(StrictModel):
    """MLflow (pip install 'evotui[tracking]'): one MLflow run per evotui run, resumed with it."""

    uri: str | None = None
    """Tracking URI (http://host:5000, file:///path; sqlite:///mlflow.db with the full `mlflow`
    package); None = a local file store in an `mlruns` folder beside the database."""
    experiment: str = "evotui"
    """Experiment the runs are logged under (created if missing)."""


class WandbConfig(StrictModel):
    """Weights & Biases (pip install 'evotui[tracking]'): the W&B run id is the evotui run id,
    so a resume continues the same W&B run."""

    project: str = "evotui"
    entity: str | None = None
    """Team or user; None = the logged-in user's default."""
    mode: Literal["offline", "online"] = "offline"
    """offline writes beside the database (upload later with `wandb sync`); online needs a login."""
    dir: str | None = None
    """Folder W&B writes its `wandb/` folder into; None = the database's folder."""


class TrackingConfig(StrictModel):
    """Experiment trackers; both unset (the default) logs nowhere and imports neither library."""

    mlflow: MlflowConfig | None = None
    wandb: WandbConfig | None = None
    every_s: float = Field(default=60.0, gt=0)
    """Seconds (of the run's clock) between the per-minute metric rows."""

    @property
    def enabled(self) -> bool:
        return self.mlflow is not None or self.wandb is not None


def default_mlflow_uri(db_path: Path) -> str:
    """A local file store beside the database (what `[tracking.mlflow]` with no uri logs to)."""
    return (Path(db_path).expanduser().resolve().parent / "mlruns").as_uri()
