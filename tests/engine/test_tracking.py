"""engine/tracking: the worker thread (batching, failures counted), a failing tracker that
never stops a run, and the real MLflow (local file store) and W&B (offline) backends read back
with each library's own API. Never the network, never $HOME."""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from engine.tracking.base import MetricRow, RunIdentity
from engine.tracking.worker import TrackerWorker


def need(module: str):
    """The tracking libraries are an extra: skipped without them, unless CI requires them."""
    if os.environ.get("EVOTUI_REQUIRE_TRACKING") == "1":
        return __import__(module)
    return pytest.importorskip(module)


@pytest.fixture
def quiet_home(tmp_path, monkeypatch):
    """Everything MLflow and W&B write goes under tmp_path, W&B never goes online."""
    for var in ("HOME", "WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return tmp_path


def rows(step: int, **values: float) -> list[MetricRow]:
    return [MetricRow(k, v, step, "proposal", 1_000 + step) for k, v in values.items()]


class Recording:
    """A backend that records calls; its first log_metrics blocks until released."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.entered, self.release = threading.Event(), threading.Event()

    def start(self, identity):
        self.calls.append(("start", identity.run_id))
        return "tracked-1"

    def log_metrics(self, batch):
        self.calls.append(("metrics", [r.step for r in batch]))
        self.entered.set()
        assert self.release.wait(30)

    def log_artifact(self, path, name):
        self.calls.append(("artifact", name))

    def log_summary(self, summary):
        self.calls.append(("summary", dict(summary)))

    def finish(self, status):
        self.calls.append(("finish", status))


IDENTITY = RunIdentity(run_id="r-test", task="rules", params={"seed": "0"}, resumed=False)


def test_rows_queued_while_the_tracker_is_busy_go_in_one_call():
    backend = Recording()
    worker = TrackerWorker(backend)
    worker.start(IDENTITY)
    worker.log_metrics(rows(1, best=0.1))
    assert backend.entered.wait(30)  # the thread is inside the first call now
    for step in (2, 3, 4):
        worker.log_metrics(rows(step, best=0.1 * step))
    worker.log_summary({"best_score": 0.4})
    worker.finish("completed")
    backend.release.set()
    assert worker.join(30)
    assert backend.calls == [("start", "r-test"), ("metrics", [1]), ("metrics", [2, 3, 4]),
                             ("summary", {"best_score": 0.4}), ("finish", "completed")]
    assert (worker.tracked_run_id, worker.rows_logged, worker.batches, worker.failures) == ("tracked-1", 4, 2, 0)


def test_a_tracker_that_cannot_start_counts_every_lost_call():
    class Broken(Recording):
        def start(self, identity):
            raise ConnectionError("tracking server refused\nsecond line")

    worker = TrackerWorker(Broken())
    worker.start(IDENTITY)
    worker.log_metrics(rows(1, best=0.1))
    worker.log_artifact(Path("x"), "best")
    worker.finish("completed")
    assert worker.join(30)
    assert worker.failures == 4 and worker.tracked_run_id is None
    assert worker.first_error == "ConnectionError: tracking server refused"


async def test_a_failing_tracker_never_stops_the_run(tmp_path, quiet_home):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    layers = [("test", {"sim": {"time_scale": 2000}, "budget": {"max_proposals": 4},
                        "tracking": {"mlflow": {"uri": (not_a_folder / "mlruns").as_uri()}}})]
    run = await EngineRun.create("rules", layers, tmp_path / "runs.db")
    result = await run.run()
    assert result.status == "completed" and result.exit_code == 0
    assert result.summary["proposal_attempts"] == 4
    report = result.summary["tracking"]["mlflow"]
    assert report["failures"] >= 1 and report["rows"] == 0
    assert any(w.startswith("tracking: mlflow: ") and "the run itself is unaffected" in w for w in run.warnings)


def test_mlflow_backend_resumes_the_same_run(quiet_home):
    need("mlflow")
    from mlflow.tracking import MlflowClient

    from engine.tracking.mlflow_backend import RUN_TAG, MlflowBackend

    uri = (quiet_home / "mlruns").as_uri()
    first = MlflowBackend(uri, "exp")
    run_id = first.start(IDENTITY)
    first.log_metrics(rows(1, best_score=0.2) + rows(2, best_score=0.3))
    first.finish("interrupted")
    second = MlflowBackend(uri, "exp")
    resumed = RunIdentity(run_id="r-test", task="rules", params={"seed": "0", "budget.max_proposals": "9"}, resumed=True)
    assert second.start(resumed) == run_id
    second.log_metrics(rows(3, best_score=0.5) + [MetricRow("best_score", 0.5, 1, "minute", 5)])
    second.log_summary({"best_score": 0.5})
    second.finish("completed")

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("exp")
    found = client.search_runs([exp.experiment_id], filter_string=f"tags.`{RUN_TAG}` = 'r-test'")
    assert [r.info.run_id for r in found] == [run_id]
    run = found[0]
    assert run.info.status == "FINISHED"
    assert run.data.params == {"seed": "0", "budget.max_proposals": "9"}
    assert run.data.tags["evotui.summary.best_score"] == "0.5"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run_id, "best_score"))
    assert history == [(1, 0.2), (2, 0.3), (3, 0.5)]
    assert [m.value for m in client.get_metric_history(run_id, "per_minute/best_score")] == [0.5]


def wandb_records(run_dir: Path) -> list:
    """The records of an offline W&B run, parsed with W&B's own protobuf (wandb_internal_pb2).
    The .wandb file frames them as a LevelDB log: a 7-byte header, then 32 KiB blocks of
    chunks, each with a 7-byte header (CRC32, length, type: full, first, middle, last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("run-*.wandb")
    data, block = path.read_bytes(), 32 * 1024
    assert data[:4] == b":W&B"
    out, pos, parts = [], 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        if pos + 7 + length > len(data):  # a record cut short by a kill: what came before stands
            break
        parts += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # full or last: a whole record
            rec = pb.Record()
            rec.ParseFromString(parts)
            out.append(rec)
            parts = b""
    return out


def wandb_history(run_dir: Path) -> list[dict]:
    import json

    return [{item.key or ".".join(item.nested_key): json.loads(item.value_json) for item in rec.history.item}
            for rec in wandb_records(run_dir) if rec.WhichOneof("record_type") == "history"]


def wandb_summary(run_dir: Path) -> dict:
    import json

    out: dict = {}
    for rec in wandb_records(run_dir):
        if rec.WhichOneof("record_type") == "summary":
            out.update({item.key or ".".join(item.nested_key): json.loads(item.value_json)
                        for item in rec.summary.update})
    return out


def test_wandb_offline_backend_logs_under_the_evotui_run_id(quiet_home):
    need("wandb")
    from engine.tracking.wandb_backend import WandbBackend

    folder = quiet_home / "wb"
    for session, steps in enumerate(((1, 2), (3,))):
        if session:
            # W&B names an offline folder by the second it started in: two sessions in one second
            # would share one (a real resume is seconds later). Wait for the clock, not a duration.
            started = int(time.time())
            while int(time.time()) == started:
                time.sleep(0.05)
        backend = WandbBackend("proj", None, "offline", folder)
        assert backend.start(IDENTITY) == "r-test"
        backend.log_metrics([r for s in steps for r in rows(s, best_score=0.1 * s)])
        backend.log_summary({"best_score": 0.1 * steps[-1]})
        backend.finish("completed")
    import wandb

    # The records reach the .wandb file through W&B's service process, which may still hold the
    # last ones after finish() returns (CI saw the second session's history missing under load);
    # a process's exit tears the service down, the test does it before reading the files.
    wandb.teardown()
    run_dirs = sorted((folder / "wandb").glob("offline-run-*-r-test"))
    assert len(run_dirs) == 2  # one folder per session, one W&B run id: `wandb sync` joins them
    points = [(h["proposal"], h["best_score"]) for d in run_dirs for h in wandb_history(d)]
    assert points == [(1, pytest.approx(0.1)), (2, pytest.approx(0.2)), (3, pytest.approx(0.3))]
    assert wandb_summary(run_dirs[-1])["best_score"] == pytest.approx(0.3)


def test_without_tracking_neither_library_is_imported():
    import subprocess
    import sys

    code = ("import sys, engine.run.runner, engine.tracking.session, evotui.cli, evotui.commands.config\n"
            "from engine.config import build_config\n"
            "assert build_config([]).tracking.enabled is False\n"
            "print(sorted({'mlflow', 'wandb'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
