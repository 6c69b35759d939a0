"""What the OS lets the sandbox do (detected once) and the scrubbed environment of evaluators."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

_SECRET = re.compile(r"(_API_KEY|_TOKEN|_SECRET|SECRET_|_PASSWORD|_CREDENTIALS?)$|SECRET|PASSWORD|API_KEY", re.I)
_PROXY = re.compile(r"^(http|https|ftp|all|no|socks)_proxy$", re.I)
_DROP_EXACT = {"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "SSH_AUTH_SOCK", "GIT_ASKPASS",
               "SSH_ASKPASS", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "NETRC", "KUBECONFIG"}
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")


def scrubbed_env(base: dict[str, str], home: str, threads: int = 1, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The evaluator's environment: no keys, tokens, secrets or proxies; BLAS threads pinned."""
    env = {k: v for k, v in base.items()
           if not _SECRET.search(k) and not _PROXY.match(k) and k not in _DROP_EXACT and not k.startswith("AWS_")}
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.update(HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
               PYTHONHASHSEED="0")
    env.setdefault("PATH", os.defpath)
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Isolation:
    prefix: tuple[str, ...]
    """Command prefix that enters the namespaces (empty when none is available)."""
    network: bool
    """True when evaluated code runs in a network namespace with no interfaces up."""
    pid_namespace: bool
    """True when every process of an evaluation dies with it (own PID namespace)."""
    note: str
    """One line for logs/README: what isolation the OS allowed."""
    pids_cgroup: str | None = None
    """Writable cgroup-v1 pids hierarchy: each evaluation gets a child with pids.max (fork bombs
    are bounded even for root, where RLIMIT_NPROC does not apply)."""


def _works(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


PIDS_V1 = "/sys/fs/cgroup/pids"


def _pids_cgroup() -> str | None:
    probe = os.path.join(PIDS_V1, f"evotui-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return None
    try:
        ok = os.path.isfile(os.path.join(probe, "pids.max"))
    finally:
        os.rmdir(probe)
    return PIDS_V1 if ok else None


@lru_cache(maxsize=1)
def detect() -> Isolation:
    """Probe once per process: namespaces, then a pids cgroup; see Isolation."""
    iso = _namespaces()
    base = None if os.environ.get("EVOTUI_SANDBOX_NO_CGROUP") else _pids_cgroup()
    if base is None:
        return iso
    return Isolation(iso.prefix, iso.network, iso.pid_namespace, iso.note + "; pids cgroup caps processes", base)


def _namespaces() -> Isolation:
    if os.environ.get("EVOTUI_SANDBOX_NO_NAMESPACES"):
        return Isolation((), False, False, "namespaces disabled by EVOTUI_SANDBOX_NO_NAMESPACES; evaluated code "
                         "keeps network access except through Python sockets, which an audit hook refuses")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), False, False, "no unshare(1) found: evaluated code is not network-isolated (Python "
                         "sockets are refused by an audit hook; native code is not)")
    full = (unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")
    if _works([*full, "true"]):
        return Isolation(full, True, True, "user+network+PID namespaces: no network, all processes die with the evaluation")
    net = (unshare, "--user", "--map-root-user", "--net")
    if _works([*net, "true"]):
        return Isolation(net, True, False, "user+network namespaces: no network; processes are killed by process group")
    return Isolation((), False, False, "unprivileged namespaces are not allowed here: evaluated code is not "
                     "network-isolated (Python sockets are refused by an audit hook; native code is not)")
