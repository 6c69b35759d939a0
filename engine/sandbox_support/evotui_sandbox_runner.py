"""Runs one evaluation inside evotui's sandbox; never imported by the engine.

usage: python -I -B evotui_sandbox_runner.py SPEC_FD RESULT_FD

Two processes. The *supervisor* (this process) reads the spec from SPEC_FD, sets up what needs
privilege (cgroup, mounts), then forks the *worker*, which confines itself (uid, capabilities,
Landlock, rlimits) and runs the evaluator. The worker hands its result to the supervisor over a
private pipe; the supervisor enforces the wall clock, kills every process the evaluation left
(it is a child subreaper, or PID 1 of the evaluation's PID namespace) and writes one JSON line,
stamped with the engine's per-evaluation nonce, to RESULT_FD. Before it, a line per cascade stage
that passed with stages still to run ({"nonce", "stage": {name, score, index, of}}), forwarded as
the worker reports it, so the engine can act on a partial score while the cascade goes on.

What this closes and what it does not:
* No result file exists: the engine reads only RESULT_FD, which the worker closes before any task
  code runs, and which lives in the supervisor, out of the evaluation's reach (another uid, or a
  PID-namespace init with capabilities the worker lacks, or outside the worker's Landlock domain;
  the supervisor is also non-dumpable, so /proc/<pid>/fd/ of it cannot be opened). The nonce
  reaches the supervisor only after the worker was forked, so no evaluation memory holds it.
* A candidate that the evaluator runs as a subprocess cannot reach the worker's pipe or memory
  either: the pipe is close-on-exec and the worker is non-dumpable.
* A Python candidate that the evaluator imports (importlib, runpy, exec of its text) runs in a
  process of its own, not in the evaluator's (evotui_candidate_guard.py), so it cannot change what
  evaluate() returns either; the evaluator file and its task folder stay trusted.
"""

import json
import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out

import evotui_sandbox_confine as confine  # noqa: E402
import evotui_sandbox_eval as ev  # noqa: E402  (defines functions only; nothing runs at import)

RESULT_CAP = 4 * 1024 * 1024
STAGE_KEY = "evotui_stage"
"""A worker frame {STAGE_KEY: {...}} reports a cascade stage; the one other frame is the result."""
_stop = []


def read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError(f"spec pipe closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_spec(fd):
    """Length line, then exactly that many bytes: the nonce that follows stays in the pipe."""
    head = bytearray()
    while not head.endswith(b"\n"):
        head += read_exact(fd, 1)
    return json.loads(read_exact(fd, int(head)))


def read_rest(fd):
    out = bytearray()
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return bytes(out)
        out += chunk


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def frame(obj):
    payload = json.dumps(obj, allow_nan=True, default=str).encode()
    return b"%d\n" % len(payload) + payload


def first_frame(buf):
    head, sep, rest = bytes(buf).partition(b"\n")
    if not sep or not head.isdigit() or len(rest) < int(head):
        return None
    return json.loads(rest[: int(head)])


def pop_stages(buf, forward):
    """Remove the complete stage frames at the front of buf, forwarding each (cleaned); stops at
    the first frame that is not one (the result, or garbage first_frame will report)."""
    while True:
        head, sep, rest = bytes(buf).partition(b"\n")
        if not sep or not head.isdigit() or len(rest) < int(head):
            return
        try:
            obj = json.loads(rest[: int(head)])
        except ValueError:
            return
        if not isinstance(obj, dict) or not isinstance(obj.get(STAGE_KEY), dict):
            return
        del buf[: len(head) + 1 + int(head)]
        stage = clean_stage(obj[STAGE_KEY])
        if stage is not None:
            forward(stage)


def clean_stage(raw):
    """Only the fields the engine reads, typed; None for a report that is not usable."""
    try:
        score, index, of = float(raw["score"]), int(raw["index"]), int(raw["of"])
    except (KeyError, TypeError, ValueError):
        return None
    if score != score or score in (float("inf"), float("-inf")) or not 0 <= index < of:
        return None
    return {"name": str(raw.get("name", ""))[:100], "score": score, "index": index, "of": of}


# -- worker --------------------------------------------------------------------------------------

def confine_worker(spec):
    c = spec["confine"]
    if c.get("uid") is not None:
        confine.switch_uid(c["uid"])
    if c.get("drop_caps"):
        confine.drop_capabilities()
    confine.prctl(confine.PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    if c.get("landlock"):
        writable = [spec["scratch"]] + (["/dev/shm"] if os.path.isdir("/dev/shm") else [])
        confine.landlock(writable, c["landlock"], c.get("read_paths"))
    confine.prctl(confine.PR_SET_DUMPABLE, 0, "make the worker non-dumpable")


def probe(spec):
    """Detection run: confinement must hold (scratch writable, the rest not)."""
    try:
        return _probe(spec)
    except OSError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _probe(spec):
    with open(os.path.join(spec["scratch"], "probe.txt"), "w") as fh:
        fh.write("ok")
    outside = os.path.join(spec["probe_outside"], "escaped.txt")
    try:
        with open(outside, "w") as fh:
            fh.write("escaped")
        return {"ok": False, "error": f"wrote {outside} outside scratch"}
    except OSError:
        pass  # expected: confinement holds
    if spec["confine"].get("read_paths") is not None:
        try:
            os.listdir(spec["probe_outside"])
            return {"ok": False, "error": f"listed {spec['probe_outside']}: reads are not confined"}
        except OSError:
            pass  # expected: reads confined to the listed paths
    with open(os.__file__, "rb") as fh:
        fh.read(1)  # the interpreter's library is readable (uid mode)
    if not os.access(sys.executable, os.X_OK):
        return {"ok": False, "error": f"{sys.executable} is not executable here"}
    return {"ok": True, "metrics": {}, "artifacts": {}}


def worker(spec, wfd):
    try:
        confine_worker(spec)
        os.chdir(spec["scratch"])
    except (OSError, confine.ConfineError) as exc:
        out = {"ok": False, "kind": "sandbox", "error": f"sandbox confinement failed: {exc}"}
    else:
        ev.set_limits(spec)
        if spec.get("probe"):
            out = probe(spec)
        else:
            if spec.get("net_guard"):
                ev.block_network()
            out = ev.evaluate(spec, lambda stage: write_all(wfd, frame({STAGE_KEY: stage})))
    try:
        data = frame(out)
    except (TypeError, ValueError) as exc:
        data = frame({"ok": False, "kind": "exception", "error": f"unserializable result: {exc}"})
    if len(data) > RESULT_CAP:
        data = frame(too_large(out, len(data)))
    write_all(wfd, data)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def too_large(out, size):
    counts = ", ".join(f"{len(out.get(k) or {})} {k}" for k in ("metrics", "artifacts"))
    return {"ok": False, "kind": "too_large", "error": (
        f"the evaluation's result is {size / 2**20:.1f} MiB ({counts}), over the {RESULT_CAP // 2**20} MiB "
        "limit; return fewer or shorter metrics and artifacts")}


# -- supervisor ------------------------------------------------------------------------------------

def supervise(spec, rfd, pid, forward=lambda stage: None):
    """Collect the worker's frames until it exits or the wall clock runs out; stage frames go to
    `forward` as they complete, the result frame stays in the returned buffer."""
    deadline = time.monotonic() + float(spec["wall_s"])
    buf, status, timed_out, eof = bytearray(), None, False, False
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0 or _stop:
            timed_out = left <= 0
            break
        ready, _, _ = select.select([] if eof else [rfd], [], [], min(left, 0.02))
        if ready:
            chunk = os.read(rfd, 65536)
            eof = not chunk
            if len(buf) < RESULT_CAP:
                buf += chunk
                pop_stages(buf, forward)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
    os.set_blocking(rfd, False)
    try:
        while len(buf) < RESULT_CAP:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            buf += chunk
    except BlockingIOError:
        pass  # a process the evaluation forked still holds the pipe: what is there is enough
    pop_stages(buf, forward)  # read after the worker's exit was seen: still before the result
    return buf, status, timed_out


def main():
    spec_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    for fd in (spec_fd, result_fd):
        os.set_inheritable(fd, False)
    signal.signal(signal.SIGTERM, lambda *_: _stop.append(1))
    spec = read_spec(spec_fd)
    out = {"setup_error": None, "timed_out": False, "exit_code": None, "exit_signal": None, "result": None,
           "killed": 0, "cleanup_error": None}
    try:
        if spec.get("cgroup_procs"):
            with open(spec["cgroup_procs"], "w") as fh:
                fh.write("0")
        if spec["confine"].get("mounts"):
            confine.readonly_except(spec["scratch"])
        if spec["confine"].get("uid") is not None:
            os.chown(spec["scratch"], spec["confine"]["uid"], spec["confine"]["uid"])
            os.chmod(spec["scratch"], 0o700)
            for name in os.listdir(spec["scratch"]):
                os.chown(os.path.join(spec["scratch"], name), spec["confine"]["uid"], spec["confine"]["uid"])
        if os.getpid() != 1:
            confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1, "become a child subreaper")
        confine.prctl(confine.PR_SET_DUMPABLE, 0, "make the supervisor non-dumpable")
    except (OSError, confine.ConfineError) as exc:
        out["setup_error"] = f"{type(exc).__name__}: {exc}"
    if out["setup_error"] is None:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            os.close(spec_fd)
            os.close(result_fd)
            worker(spec, wfd)
        os.close(wfd)
        # Read now (the worker exists, so no evaluation memory holds it): stage lines carry it too.
        nonce = read_rest(spec_fd).decode("ascii", "replace")

        def forward(stage):
            write_all(result_fd, json.dumps({"nonce": nonce, "stage": stage}).encode() + b"\n")

        buf, status, out["timed_out"] = supervise(spec, rfd, pid, forward)
        if status is not None:
            out["exit_code"] = os.waitstatus_to_exitcode(status)
            if out["exit_code"] < 0:
                out["exit_signal"], out["exit_code"] = -out["exit_code"], None
        try:
            out["result"] = first_frame(buf)
        except ValueError as exc:
            out["result"] = {"ok": False, "kind": "exception", "error": f"garbled result from the worker: {exc}"}
        try:
            out["killed"] = confine.kill_all(spec["confine"].get("uid"))
        except confine.ConfineError as exc:
            out["cleanup_error"] = str(exc)
    else:
        nonce = read_rest(spec_fd).decode("ascii", "replace")
    out["nonce"] = nonce
    write_all(result_fd, json.dumps(out, allow_nan=True, default=str).encode())
    os._exit(0)


if __name__ == "__main__":
    main()
