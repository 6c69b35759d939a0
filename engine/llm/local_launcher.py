"""Child process that runs llama.cpp's HTTP server (xllamacpp) for engine.llm.local.

    python -m engine.llm.local_launcher '{"model": PATH, "port": N, "parallel": N, ...}'

It dies with its parent (PR_SET_PDEATHSIG on Linux, and a parent-pid watch everywhere), exits
cleanly on SIGTERM/SIGINT, and reports a startup failure as one line on stderr starting with
ERROR_PREFIX (llama.cpp's own log lines go to stderr too). Only ever binds 127.0.0.1.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import threading

ERROR_PREFIX = "evotui-local: error: "
READY_PREFIX = "evotui-local: ready "
HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except OSError as exc:  # no libc symbol: the pid watch below still covers us
            print(f"evotui-local: warning: prctl unavailable ({exc})", file=sys.stderr, flush=True)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        sys.exit(1)


def _fail(message: str) -> None:
    print("\n" + ERROR_PREFIX + message, file=sys.stderr, flush=True)
    sys.exit(2)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        _fail("usage: python -m engine.llm.local_launcher JSON")
    spec = json.loads(argv[0])
    parent = int(spec.get("parent_pid") or 0)
    if parent:
        _die_with_parent(parent)
    port = int(spec["port"])
    if not _port_free(port):
        _fail(f"port {port} on {HOST} is already in use; pick another --port or omit it for a free one")
    try:
        import xllamacpp
    except ImportError:
        _fail("xllamacpp is not installed; install the local backend: pip install 'evotui[local]'")
    params = xllamacpp.CommonParams()
    params.model.path = spec["model"]
    params.hostnames = [HOST]
    params.port = port
    params.n_parallel = int(spec["parallel"])
    params.n_ctx = int(spec["ctx"]) * int(spec["parallel"])  # llama.cpp splits n_ctx across slots
    params.cont_batching = True
    params.cpuparams.n_threads = int(spec["threads"])
    params.cpuparams_batch.n_threads = int(spec["threads"])
    params.model_alias = set(spec["aliases"])
    params.endpoint_metrics = True
    stop = threading.Event()

    def on_signal(signum, frame) -> None:  # noqa: ARG001 (signal handler signature)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server = xllamacpp.Server(params)  # returns once the model is loaded and the port listens
    except RuntimeError as exc:
        _fail(f"llama.cpp server failed to start ({exc})")
    # On a line of its own: llama.cpp's threads write to the same stderr, mid-line at times.
    print("\n" + READY_PREFIX + f"http://{HOST}:{port}", file=sys.stderr, flush=True)
    while not stop.wait(0.5):
        if parent and os.getppid() != parent:
            break
    del server  # ~Server stops the HTTP loop and frees the model


if __name__ == "__main__":
    main(sys.argv[1:])
