"""engine/evaluator/ray_connection.py without starting Ray: the token file's errors, the config
rule, the environment around ray.init (and its restoring), the loopback guard, and Ray's error
printing routed to stderr. A fake `ray` stands in for the driver; Ray's cached auth state is never
touched (_resync_auth is replaced), so later in-process Ray tests see the environment they set."""

from __future__ import annotations

import importlib.util
import os

import pytest
from pydantic import ValidationError

from engine.evaluator import ray_connection
from engine.evaluator.ray_connection import SINGLE_MACHINE_VAR, RaySession, read_token_file
from engine.evaluator.service import EvaluatorSetupError
from engine.config.service import EvaluatorConfig

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")


def test_token_file_missing_empty_and_good(tmp_path):
    with pytest.raises(EvaluatorSetupError, match=r"cannot read \[evaluator\] auth_token_file .*missing.*No such file"):
        read_token_file(str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("\n  \n")
    with pytest.raises(EvaluatorSetupError, match=r"auth_token_file .*empty.* is empty"):
        read_token_file(str(tmp_path / "empty"))
    (tmp_path / "tok").write_text("  abc123 \nignored\n")
    assert read_token_file(str(tmp_path / "tok")) == "abc123"


def test_token_file_needs_a_cluster_address():
    with pytest.raises(ValidationError, match="auth_token_file is the token of a cluster: set address too"):
        EvaluatorConfig(backend="ray", auth_token_file="/t")
    assert EvaluatorConfig(backend="ray", address="h:6379", auth_token_file="/t").auth_token_file == "/t"


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("::1", True), ("[::1]", True),
                                            ("::ffff:127.0.0.1", True), ("localhost", True),
                                            ("192.0.2.2", False), ("0.0.0.0", False), ("::", False),
                                            ("fd00::2", False), ("node-1", False)])
def test_loopback_addresses(host, loopback):
    assert ray_connection._is_loopback(host) is loopback


class FakeRay:
    """ray.init records what the driver's environment said at that moment."""

    __version__ = "fake"

    def __init__(self, gcs_address: str = "127.0.0.1:6379", fail: Exception | None = None) -> None:
        self.gcs_address, self.fail = gcs_address, fail
        self.seen: dict = {}
        self.shutdowns = 0

    def init(self, **kwargs) -> None:
        from ray._private import ray_constants

        self.seen = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                                                     SINGLE_MACHINE_VAR)}
        self.seen["cluster_mode"] = ray_constants.ENABLE_RAY_CLUSTER
        self.seen["kwargs"] = kwargs
        if self.fail:
            raise self.fail

    def get_runtime_context(self):
        return type("Ctx", (), {"gcs_address": self.gcs_address})()

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def resyncs(monkeypatch) -> list[dict]:
    """Each _resync_auth call, with the auth variables it would have read."""
    calls: list[dict] = []
    monkeypatch.setattr(ray_connection, "_resync_auth",
                        lambda: calls.append({k: os.environ.get(k) for k in ray_connection.AUTH_VARS}))
    return calls


@needs_ray
def test_own_instance_gets_a_fresh_token_and_loopback_only_around_init(monkeypatch, resyncs):
    from ray._private import ray_constants

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the user's setting: back after init
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/elsewhere")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv(SINGLE_MACHINE_VAR, raising=False)
    before = ray_constants.ENABLE_RAY_CLUSTER
    tokens = []
    for _ in range(2):
        fake = FakeRay()
        session = RaySession(fake, None, None)
        session.open({"num_cpus": 1})
        seen = fake.seen
        assert seen["RAY_AUTH_MODE"] == "token" and seen["RAY_AUTH_TOKEN_PATH"] is None
        assert len(seen["RAY_AUTH_TOKEN"]) == 64 and seen[SINGLE_MACHINE_VAR] == "0"
        assert seen["cluster_mode"] is False and seen["kwargs"] == {"num_cpus": 1}
        tokens.append(seen["RAY_AUTH_TOKEN"])
        # Afterwards the driver's environment is the user's again, the token gone from it.
        assert os.environ["RAY_AUTH_MODE"] == "disabled" and os.environ["RAY_AUTH_TOKEN_PATH"] == "/elsewhere"
        assert "RAY_AUTH_TOKEN" not in os.environ and SINGLE_MACHINE_VAR not in os.environ
        assert ray_constants.ENABLE_RAY_CLUSTER == before and session.token_mode
        session.close()
    assert tokens[0] != tokens[1]
    # Re-read before init (token mode) and after close (the user's environment), each time.
    assert [c["RAY_AUTH_MODE"] for c in resyncs] == ["token", "disabled", "token", "disabled"]


@needs_ray
def test_own_instance_on_a_routable_address_is_stopped_not_used(resyncs):
    fake = FakeRay(gcs_address="192.0.2.2:6379")
    with pytest.raises(EvaluatorSetupError, match=r"came up on 192\.0\.2\.2, not 127\.0\.0\.1.*evotui stopped it"):
        RaySession(fake, None, None).open({})
    assert fake.shutdowns == 1


@needs_ray
def test_cluster_token_file_turns_token_mode_on_for_init_only(tmp_path, monkeypatch, resyncs):
    from ray._private import ray_constants

    for k in ray_connection.AUTH_VARS:
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "tok").write_text("s3cret\n")
    fake = FakeRay(gcs_address="192.0.2.2:6379")  # a cluster may be anywhere: no loopback check
    session = RaySession(fake, "192.0.2.2:6379", str(tmp_path / "tok"))
    session.open({})
    assert fake.seen["RAY_AUTH_MODE"] == "token" and fake.seen["RAY_AUTH_TOKEN"] == "s3cret"
    assert fake.seen[SINGLE_MACHINE_VAR] is None and fake.seen["cluster_mode"] == ray_constants.ENABLE_RAY_CLUSTER
    assert not any(k in os.environ for k in ray_connection.AUTH_VARS) and fake.shutdowns == 0
    assert "the token is the cluster's" in session.hint()
    session.close()


@needs_ray
def test_a_cluster_without_a_token_leaves_the_environment_alone(monkeypatch, resyncs):
    for k in ray_connection.AUTH_VARS:
        monkeypatch.delenv(k, raising=False)
    fake = FakeRay(fail=ConnectionError("Failed to connect to Ray cluster"))
    session = RaySession(fake, "10.0.0.1:6379", None)
    with pytest.raises(ConnectionError):
        session.open({})
    assert fake.seen["RAY_AUTH_MODE"] is None and resyncs == []
    assert "RAY_AUTH_MODE=token" in session.hint()  # a failed connection names the token settings


@needs_ray
def test_a_missing_token_file_fails_before_ray_init(tmp_path, resyncs):
    fake = FakeRay()
    with pytest.raises(EvaluatorSetupError, match="cannot read"):
        RaySession(fake, "10.0.0.1:6379", str(tmp_path / "nope")).open({})
    assert fake.seen == {}


@needs_ray
def test_ray_error_messages_go_to_stderr_and_back_after_close(capsys):
    from ray._private import worker

    original = worker.print_to_stdstream
    first, second = RaySession(FakeRay(), "h:1", None), RaySession(FakeRay(), "h:1", None)
    first._errors_to_stderr()
    second._errors_to_stderr()  # a second session of the process does not wrap it twice
    try:
        assert worker.print_to_stdstream.evotui_original is original
        worker.print_to_stdstream({"lines": ["A worker died or was killed"], "pid": "raylet", "is_err": False},
                                  ignore_prefix=False)
        out, err = capsys.readouterr()
        assert out == "" and "A worker died or was killed" in err
    finally:
        second.close()
        first.close()
    assert worker.print_to_stdstream is original


@needs_ray
def test_a_ray_without_token_auth_still_gets_loopback_only(tmp_path, monkeypatch, resyncs):
    monkeypatch.setattr(ray_connection, "has_token_auth", lambda: False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    fake = FakeRay()
    session = RaySession(fake, None, None)
    session.open({})
    assert fake.seen[SINGLE_MACHINE_VAR] == "0" and fake.seen["cluster_mode"] is False
    assert fake.seen["RAY_AUTH_MODE"] is None and not session.token_mode
    session.close()
    (tmp_path / "tok").write_text("abc\n")
    with pytest.raises(EvaluatorSetupError, match=r"Ray fake has no token authentication.*remove auth_token_file"):
        RaySession(FakeRay(), "h:1", str(tmp_path / "tok")).open({})
