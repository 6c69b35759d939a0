"""A pids cgroup per evaluation, on cgroup v1 (a `pids` hierarchy) or v2 (a delegated subtree
with the pids controller enabled). Root ignores RLIMIT_NPROC, so this is what bounds fork bombs
there; it also lets the engine kill every process of an evaluation whatever its session or uid."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal

PIDS_V1 = "/sys/fs/cgroup/pids"


def _cgroup2_mount() -> str | None:
    try:
        with open("/proc/self/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return parts[1]
    except OSError:
        return None
    return None


def _v2_candidates() -> list[str]:
    """The v2 root (used when running as root) and our own cgroup (when it was delegated to us);
    only where the pids controller is already enabled for children: we never change it."""
    mount = _cgroup2_mount()
    if mount is None:
        return []
    out = [mount]
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("0::"):
                    own = os.path.join(mount, line[3:].strip().lstrip("/"))
                    if own != mount:
                        out.append(own)
    except OSError:
        return out
    return out


def _usable(base: str) -> bool:
    probe = os.path.join(base, f"evotui-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return os.path.isfile(os.path.join(probe, "pids.max"))
    finally:
        os.rmdir(probe)


def find_pids_base() -> tuple[str, int] | None:
    """(base directory, cgroup version) of a writable pids cgroup, or None."""
    if _usable(PIDS_V1):
        return PIDS_V1, 1
    for base in _v2_candidates():
        try:
            with open(os.path.join(base, "cgroup.subtree_control"), encoding="utf-8") as fh:
                enabled = "pids" in fh.read().split()
        except OSError:
            continue
        if enabled and _usable(base):
            return base, 2
    return None


class PidsGroup:
    """One evaluation's pids cgroup: pids.max set, every member killed and the group removed at the end."""

    def __init__(self, base: str | None, nproc: int, tag: str) -> None:
        self.path: str | None = None
        if base is None:
            return
        path = os.path.join(base, f"evotui-{tag}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(nproc))
        except OSError:
            self._remove(path)
            return
        self.path = path

    @property
    def procs_file(self) -> str | None:
        return os.path.join(self.path, "cgroup.procs") if self.path else None

    def kill_all(self) -> None:
        if not self.path:
            return
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as fh:
                fh.write("1")  # v2 (Linux >= 5.14): atomic, no race with forks
            return
        except OSError:
            pass  # v1 or an older kernel: signal the members one by one below
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as fh:
                pids = [int(x) for x in fh.read().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue

    async def close(self) -> None:
        if not self.path:
            return
        for _ in range(250):
            self.kill_all()
            if self._remove(self.path):
                return
            await asyncio.sleep(0.02)

    @staticmethod
    def _remove(path: str) -> bool:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False
