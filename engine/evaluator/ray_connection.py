"""How the driver joins Ray, and what it keeps off its stdout (README "Evaluating on a Ray cluster").

- The run's own instance ([evaluator] address unset) listens on loopback only. Ray rewrites a node
  address of 127.0.0.1 to the machine's routable address unless its single-machine mode is on
  (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read at import into ray_constants.ENABLE_RAY_CLUSTER); with
  the node address left at 127.0.0.1 every gRPC server (GCS, raylet, object manager, workers,
  runtime-env agent) binds 127.0.0.1 instead of 0.0.0.0. Both are set only around ray.init: a later
  connection to a real cluster from the same process must resolve its own address.
- It also requires a token: a fresh one per run, handed to the Ray processes in their environment
  (never a file; Ray's default would write ~/.ray/auth_token), and taken out of the driver's
  environment again once they have started, so the driver's other subprocesses never see it.
  A Ray without token authentication (older than the RAY_AUTH_MODE releases) still gets
  loopback only; a token file for a cluster is then refused with the reason.
- A cluster: Ray's own token sources (RAY_AUTH_MODE=token with RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH
  or ~/.ray/auth_token), or [evaluator] auth_token_file, which turns token mode on for the run.
- Ray's driver prints the cluster's error messages ("A worker died ...") to sys.stdout from a
  thread of its own; they go to stderr instead, so `--no-ui > out.json` stays JSON.
The driver caches the auth mode and token (RayConfig, AuthenticationTokenLoader): both are
re-read from the environment after each change, in the order Ray's own test helpers use.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any

from engine.evaluator.service import EvaluatorSetupError

AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
SINGLE_MACHINE_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def read_token_file(path: str) -> str:
    """The token in [evaluator] auth_token_file (its first line), or a setup error naming the file."""
    where = Path(path).expanduser()
    try:
        lines = where.read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise EvaluatorSetupError(f"cannot read [evaluator] auth_token_file {where} ({why}); point it at the "
                                  "file holding the cluster's token (`ray get-auth-token` on the head prints it)"
                                  ) from None
    if not lines or not lines[0].strip():
        raise EvaluatorSetupError(f"[evaluator] auth_token_file {where} is empty; put the cluster's token in it "
                                  "(`ray get-auth-token` on the head prints it)")
    return lines[0].strip()


def has_token_auth() -> bool:
    """This Ray has token authentication (RAY_AUTH_MODE=token; older releases have none)."""
    import ray._raylet as raylet

    return hasattr(raylet, "AuthenticationTokenLoader") and hasattr(raylet, "Config")


def _resync_auth() -> None:
    """Make the driver re-read RAY_AUTH_* from the environment (config first, then the token cache)."""
    if not has_token_auth():
        return
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host == "localhost"
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


class RaySession:
    """One ray.init the run makes, and its undoing after ray.shutdown."""

    def __init__(self, ray: Any, address: str | None, token_file: str | None) -> None:
        self.ray = ray
        self.own_instance = address is None
        self.token_file = token_file
        self.token_mode = False
        """The connection authenticates with a token (said in a failed connection's hint)."""
        self._printer: Any = None

    def _environment(self) -> dict[str, str]:
        tokens = has_token_auth()
        if self.own_instance:  # without token support (an old Ray) it is still loopback only
            token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)} if tokens else {}
            return {**token, SINGLE_MACHINE_VAR: "0"}
        if self.token_file:
            if not tokens:
                raise EvaluatorSetupError(f"Ray {self.ray.__version__} has no token authentication, so [evaluator] "
                                          "auth_token_file cannot be used: upgrade Ray on the driver and the cluster "
                                          "(pip install -U 'evotui[ray]') or remove auth_token_file")
            return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": read_token_file(self.token_file)}
        return {}

    def open(self, init_args: dict) -> None:
        """ray.init(**init_args) with the environment above; the caller maps its exceptions."""
        env = self._environment()
        saved = {k: os.environ.get(k) for k in (*AUTH_VARS, SINGLE_MACHINE_VAR)}
        from ray._private import ray_constants

        saved_cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
        try:
            if env:
                if "RAY_AUTH_TOKEN" in env:
                    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)  # the token given here wins
                os.environ.update(env)
                _resync_auth()
            if self.own_instance:
                ray_constants.ENABLE_RAY_CLUSTER = False
            self.token_mode = (os.environ.get("RAY_AUTH_MODE") or "").lower() == "token"
            self.ray.init(**init_args)
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = saved_cluster_mode
            if env:
                # The Ray processes have their copy; the driver keeps its token cached in memory.
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        self._errors_to_stderr()
        if self.own_instance:
            self._check_loopback()

    def _check_loopback(self) -> None:
        """Fail closed: an instance that came up on a routable address is stopped, not used."""
        host = self.ray.get_runtime_context().gcs_address.rpartition(":")[0]
        if _is_loopback(host):
            return
        self.ray.shutdown()
        self.close()
        raise EvaluatorSetupError(f"the local Ray instance came up on {host}, not 127.0.0.1, so it would accept "
                                  f"connections from the network (Ray {self.ray.__version__}); evotui stopped it: "
                                  "set [evaluator] address to a cluster you secured, or use --evaluator local")

    def _errors_to_stderr(self) -> None:
        """Ray's error-message thread calls worker.print_to_stdstream; route what it prints to stderr."""
        from ray._private import worker

        printer = getattr(worker, "print_to_stdstream", None)
        if printer is None or getattr(printer, "evotui_original", None) is not None:
            return  # a Ray without it, or already routed by an earlier session of this process

        def to_stderr(data: dict, *args: Any, **kwargs: Any) -> Any:
            return printer({**data, "is_err": True}, *args, **kwargs)

        to_stderr.evotui_original = printer  # type: ignore[attr-defined]
        worker.print_to_stdstream = to_stderr
        self._printer = printer

    def close(self) -> None:
        """After ray.shutdown: Ray's printing as it was, and the auth state the environment says."""
        if self._printer is not None:
            from ray._private import worker

            worker.print_to_stdstream = self._printer
            self._printer = None
        if self.own_instance or self.token_file:
            _resync_auth()

    def hint(self) -> str:
        """What to check when ray.init could not connect to a cluster."""
        if self.own_instance:
            return "check that this machine can start Ray (or use --evaluator local)"
        if self.token_mode:
            return ("check [evaluator] address (or --ray-address) and that the token is the cluster's "
                    "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token or [evaluator] auth_token_file)")
        return ("check [evaluator] address (or --ray-address); a cluster with token authentication needs "
                "RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN) or [evaluator] auth_token_file")
