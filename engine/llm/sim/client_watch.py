"""What the simulator's clients are doing, read from Linux's /proc: the virtual clock's eyes.

The clients are a process (the bench that started the sim-server) and its descendants, less
the sim-server itself and any other sim-server. One `sample()` says, since the previous one:
- `busy`: a client thread is running or waiting for a CPU (state R), or in uninterruptible
  I/O (D), or a loopback connection to the server still has unread bytes in either direction;
- `cpu_s`: the largest CPU time any one client process used (its threads summed), that is the
  time its work would have taken with a core to itself: CPU contention from anything else on
  the machine adds nothing.

Per-thread CPU comes from /proc/PID/task/TID/schedstat (nanoseconds), states from .../stat.

A poller (a thread that wakes dozens of times a second to check a queue: OpenEvolve's and
ShinkaEvolve's controllers) is runnable at many looks on a loaded machine, which would hold the
clock at its CPU rate. A runnable thread whose recent history is a poller's (at least
POLL_SLICES times on a CPU over the last POLL_WINDOW_S, under POLL_CPU_S each) does not count as
busy. The error this can make is a jump while such a thread had real work pending, which delays
that client's next request: it never flatters the client.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_ESTABLISHED = "01"  # TCP state in /proc/net/tcp
POLL_WINDOW_S = 0.1
POLL_SLICES = 4
POLL_CPU_S = 0.0005
_TREE_EVERY = 20
"""Re-list the process tree every this many samples (a new evaluator process joins within it)."""


class ClientWatchError(RuntimeError):
    """The clients cannot be watched (no /proc, or the process is gone)."""


@dataclass(frozen=True)
class Sample:
    busy: bool
    cpu_s: float


def available() -> bool:
    return (PROC / "self" / "task").is_dir() and (PROC / "self" / "schedstat").exists()


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # the thread or process ended between listing and reading
        return None


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        text = _read(task / "children")
        if text:
            kids.extend(int(p) for p in text.split())
    return kids


def _is_sim_server(pid: int) -> bool:
    raw = _read(PROC / str(pid) / "cmdline")
    return raw is not None and "\0sim-server\0" in raw


class ClientWatch:
    """Watches `root` and its descendants, excluding `exclude` (the server's own pid) and every
    sim-server; `port`: the server's TCP port, whose loopback queues count as activity."""

    def __init__(self, root: int, exclude: int | None = None, port: int | None = None) -> None:
        if not available():
            raise ClientWatchError("the virtual clock reads /proc (Linux); use --clock wall here")
        if not (PROC / str(root)).is_dir():
            raise ClientWatchError(f"no process {root} to watch; give the running client's pid with --watch-pid")
        self.root, self.exclude, self.port = root, exclude if exclude is not None else os.getpid(), port
        self._pids: list[int] = []
        self._cpu: dict[int, int] = {}  # thread id -> ns on a CPU, at the last sample
        self._seen: dict[int, int] = {}
        self._n = 0
        self._history: dict[int, tuple[int, int, int]] = {}  # tid -> (t, cpu ns, slices) at window start
        self._pollers: set[int] = set()

    def _tree(self) -> list[int]:
        out, todo, seen = [], [self.root], set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid == self.exclude:
                continue
            seen.add(pid)
            if pid != self.root and _is_sim_server(pid):
                continue
            out.append(pid)
            todo.extend(_children(pid))
        return out

    def _process(self, pid: int, first: bool) -> tuple[bool, int] | None:
        """(a thread is busy, ns of CPU its threads used since the last sample) or None when the
        process is gone. A thread first seen now was born since then (all its CPU counts), except
        on the first sample, which only sets the baseline."""
        try:
            tasks = list((PROC / str(pid) / "task").iterdir())
        except OSError:
            return None
        busy, ns = False, 0
        for task in tasks:
            stat = _read(task / "stat")
            sched = _read(task / "schedstat")
            if stat is None or sched is None:
                continue
            # The state follows the command name, which is in parentheses and may hold spaces.
            fields = sched.split()
            now, slices = int(fields[0]), int(fields[2])
            tid = int(task.name)
            self._classify(tid, now, slices, time.monotonic_ns())
            state = stat[stat.rfind(")") + 2]
            busy = busy or state == "D" or (state == "R" and tid not in self._pollers)
            ns += max(0, now - self._cpu.get(tid, now if first else 0))
            self._seen[tid] = now
        return busy, ns

    def _classify(self, tid: int, cpu_ns: int, slices: int, t: int) -> None:
        """Once per POLL_WINDOW_S of a thread's life (t: ns): is it a poller (many short turns on a CPU)?"""
        start = self._history.get(tid)
        if start is None:
            self._history[tid] = (t, cpu_ns, slices)
        elif t - start[0] >= POLL_WINDOW_S * 1e9:
            turns, used = slices - start[2], cpu_ns - start[1]
            if turns >= POLL_SLICES and used < POLL_CPU_S * 1e9 * turns:
                self._pollers.add(tid)
            else:
                self._pollers.discard(tid)
            self._history[tid] = (t, cpu_ns, slices)

    def _queues_pending(self) -> bool:
        if self.port is None:
            return False
        port = f":{self.port:04X}"
        for name in ("tcp", "tcp6"):
            text = _read(PROC / "net" / name)
            for line in (text or "").splitlines()[1:]:
                f = line.split()
                # Established only: a pooled connection the server closed sits in CLOSE_WAIT with
                # its unread FIN counted in the queue until the client reuses or drops it.
                if len(f) > 4 and f[3] == _ESTABLISHED and (f[1].endswith(port) or f[2].endswith(port)) \
                        and f[4] != "00000000:00000000":
                    return True
        return False

    def _scan(self, pids: list[int], first: bool) -> tuple[bool, int]:
        busy, cpu = False, 0
        for pid in pids:
            got = self._process(pid, first)
            if got is not None:
                busy, cpu = busy or got[0], max(cpu, got[1])
        return busy, cpu

    def sample(self) -> Sample:
        first = self._n == 0
        if first or self._n % _TREE_EVERY == 0:
            self._pids = self._tree()
        self._n += 1
        self._seen = {}
        busy, cpu = self._scan(self._pids, first)
        if not busy:  # about to look idle: first make sure no new process (an evaluator) is working
            fresh = [p for p in self._tree() if p not in self._pids]
            if fresh:
                self._pids += fresh
                more_busy, more_cpu = self._scan(fresh, first)
                busy, cpu = busy or more_busy, max(cpu, more_cpu)
        if not self._pids:
            raise ClientWatchError(f"process {self.root} is gone")
        self._cpu = self._seen
        if len(self._history) > 2 * len(self._seen) + 64:  # forget threads that ended
            self._history = {t: h for t, h in self._history.items() if t in self._seen}
            self._pollers &= self._seen.keys()
        return Sample(busy=busy or self._queues_pending(), cpu_s=cpu / 1e9)
