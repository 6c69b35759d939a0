"""What the OS lets the sandbox do (probed once per process) and the scrubbed environment of evaluators.

Modes, best first (each is probed by running the real runner, so a mode is used only if it works):
1. namespaces: user+mount+PID+network namespaces; all mounts read-only except scratch, a fresh
   /proc, capabilities dropped. Files, host processes, secrets and network are out of reach and
   every process dies with the evaluation's PID namespace.
2. uid (the engine is root, no namespaces): each evaluation runs as an unprivileged uid of its
   own (engine/sandbox/uids.py), plus Landlock where the kernel has it. An evaluation whose task
   folder, scratch or interpreter that uid cannot read runs as root with all capabilities
   dropped under Landlock instead (the result carries a warning).
3. landlock (no namespaces, not root or no free uid): Landlock confines writes to scratch, denies
   TCP, ptrace-style /proc access and signals outside the evaluation.
4. none: only the scrubbed environment, rlimits and the subreaper; the note says so.
A pids cgroup (v1 or v2) is added where writable. EVOTUI_SANDBOX_NO_NAMESPACES=1,
EVOTUI_SANDBOX_NO_CGROUP=1 and EVOTUI_SANDBOX_NO_LANDLOCK=1 force the fallbacks.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from engine.sandbox import channel, uids
from engine.sandbox.cgroups import find_pids_base
from engine.sandbox.readable import readable_paths

_SECRET = re.compile(r"(_API_KEY|_TOKEN|_SECRET|SECRET_|_PASSWORD|_CREDENTIALS?)$|SECRET|PASSWORD|API_KEY", re.I)
_PROXY = re.compile(r"^(http|https|ftp|all|no|socks)_proxy$", re.I)
_DROP_EXACT = {"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "SSH_AUTH_SOCK", "GIT_ASKPASS",
               "SSH_ASKPASS", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "NETRC", "KUBECONFIG"}
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")


_KEY_VALUE = re.compile(r"^(sk-[A-Za-z0-9_-]{16,}|sk-ant-|ghp_[A-Za-z0-9]{20,}|github_pat_|gh[ousr]_[A-Za-z0-9]{20,}"
                        r"|xox[abprs]-|AKIA[0-9A-Z]{16}$|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{20,}|glpat-"
                        r"|-----BEGIN [A-Z ]*PRIVATE KEY)")
"""Values that look like a provider's key whatever the variable is called (OpenAI, Anthropic, GitHub,
Slack, AWS, Google, Hugging Face, GitLab, PEM private keys)."""
_MIN_SECRET = 8
"""Shorter values are not matched by value (a key is never this short; "1" or "true" are not keys)."""


def _is_secret_name(name: str, secret_vars: frozenset[str]) -> bool:
    return bool(_SECRET.search(name)) or name.startswith("AWS_") or name in secret_vars


def scrubbed_env(base: dict[str, str], home: str, threads: int = 1, extra: dict[str, str] | None = None,
                 secret_vars: frozenset[str] = frozenset()) -> dict[str, str]:
    """The evaluator's environment: no keys, tokens, secrets or proxies; BLAS threads pinned.
    secret_vars: further names to drop (the run's api_key_env, whatever it is called). A secret is
    also dropped by value: any variable holding (or embedding, as in a URL) the value of a variable
    dropped by name, and any value shaped like a known provider key."""
    secrets = {v for k, v in base.items() if _is_secret_name(k, secret_vars) and len(v) >= _MIN_SECRET}

    def keep(name: str, value: str) -> bool:
        if _is_secret_name(name, secret_vars) or _PROXY.match(name) or name in _DROP_EXACT:
            return False
        if _KEY_VALUE.match(value.strip()):
            return False
        return not any(secret in value for secret in secrets)

    env = {k: v for k, v in base.items() if keep(k, v)}
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
    """True when every process of an evaluation dies with it (own PID namespace, host /proc hidden)."""
    note: str = ""
    """What isolation applies, for logs and the run's figures (derived from the fields when empty)."""
    pids_cgroup: str | None = None
    """Writable pids cgroup base: each evaluation gets a child with pids.max (bounds fork bombs
    even for root, where RLIMIT_NPROC does not apply)."""
    mounts: bool = False
    """Everything read-only except scratch (needs a prefix with a mount namespace)."""
    uid_switch: bool = False
    """Root without namespaces: each evaluation runs as an unprivileged uid of its own."""
    landlock: int = 0
    """Landlock ABI applied to the worker (0: none)."""
    drop_caps: bool = False
    """The worker runs as uid 0 (of a user namespace, or real root) and drops every capability."""
    cgroup_version: int = 0

    def describe(self) -> str:
        return self.note or describe(self)


def describe(iso: Isolation) -> str:
    """One line: files, processes and secrets, process cleanup, process cap, network, results."""
    if iso.mounts:
        files = "read-only except scratch (mount namespace)"
    elif iso.uid_switch:
        files = "an unprivileged uid per evaluation" + (
            " plus Landlock: writes only in scratch" if iso.landlock else
            ": root-owned files are read-only but world-writable places (/tmp) are not")
    elif iso.landlock:
        files = "Landlock: writes only in scratch" + ("; root's capabilities dropped" if iso.drop_caps else "")
    else:
        files = "NOT confined: evaluated code can write whatever this user can"
    if iso.pid_namespace:
        procs = "host processes hidden (own PID namespace), so the engine's environment is unreadable"
    elif iso.uid_switch or iso.landlock:
        procs = "other processes visible but their environ unreadable (" + (
            "other uid)" if iso.uid_switch else "Landlock)")
    elif iso.drop_caps:
        procs = ("other processes visible but a root engine's environ unreadable (capabilities dropped: "
                 "a process cannot read one that holds more)")
    else:
        procs = "the engine's environment is READABLE through /proc/<pid>/environ (no namespaces, uid switch or Landlock)"
    if iso.pid_namespace:
        cleanup = "all die with the evaluation (PID namespace)"
    elif iso.uid_switch or iso.landlock >= 6:
        cleanup = "a supervisor the evaluation cannot signal kills every leftover process"
    else:
        cleanup = "a subreaper supervisor kills leftover processes (evaluated code could kill it first)"
    if iso.pids_cgroup:
        cap = f"pids cgroup v{iso.cgroup_version} caps processes"
    elif iso.prefix or iso.uid_switch:
        cap = "RLIMIT_NPROC caps processes"
    else:
        cap = "no cap on processes (the wall clock bounds fork bombs)"
    if iso.network:
        net = "none (network namespace)"
    elif iso.landlock >= 4:
        net = "no TCP (Landlock), Python sockets refused by an audit hook"
    else:
        net = "network reachable by native code (Python sockets refused by an audit hook)"
    reads = ("only the system, the interpreter, the task folder, scratch and declared paths (Landlock)"
             if iso.landlock else "NOT confined (no Landlock): evaluated code reads whatever "
             + ("the evaluation's uid can" if iso.uid_switch else "this user can"))
    parts = {"files": files, "reads": reads, "/proc": procs, "leftover processes": cleanup, "process cap": cap, "network": net,
             "results": ("over a supervisor-held pipe with a nonce; an imported Python candidate runs in "
                         "its own process")}
    return "; ".join(f"{k}: {v}" for k, v in parts.items())


def _landlock_abi() -> int:
    if os.environ.get("EVOTUI_SANDBOX_NO_LANDLOCK"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return abi if abi > 0 else 0


def confine_spec(iso: Isolation, uid: int | None, read_paths: list[str] | None = None) -> dict:
    """read_paths: where evaluated code may read (Landlock); None leaves reads unrestricted."""
    return {"mounts": iso.mounts, "uid": uid, "landlock": iso.landlock, "drop_caps": iso.drop_caps,
            "read_paths": read_paths}


def probe(iso: Isolation, python: str | None = None) -> str:
    """Run the runner once in this mode: "" when confinement holds, else why not."""
    root = tempfile.mkdtemp(prefix="evotui-probe-")
    lease = uids.UidLease() if iso.uid_switch else None
    try:
        scratch, outside = os.path.join(root, "scratch"), os.path.join(root, "outside")
        os.mkdir(scratch)
        os.mkdir(outside)
        os.chmod(root, 0o755)
        reads = readable_paths(python or sys.executable, Path(scratch), channel.SUPPORT_DIR) if iso.landlock else None
        spec = {"probe": True, "scratch": scratch, "probe_outside": outside, "wall_s": 20, "limits": {},
                "confine": confine_spec(iso, lease.uid if lease else None, reads)}
        nonce = channel.new_nonce()
        spec_fd = channel.spec_pipe(spec, nonce)
        res_r, res_w = os.pipe()
        try:
            proc = subprocess.run(channel.command(iso.prefix, python or sys.executable, spec_fd, res_w),
                                  pass_fds=(spec_fd, res_w), stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=30, cwd=scratch, env=scrubbed_env(dict(os.environ), home=scratch))
        finally:
            os.close(spec_fd)
            os.close(res_w)
        with os.fdopen(res_r, "rb") as fh:
            report, why = channel.parse_report(fh.read(channel.REPORT_CAP), nonce)
        if report is None:
            return f"{why} (exit code {proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]})"
        if report.get("setup_error"):
            return str(report["setup_error"])
        result = report.get("result") or {}
        return "" if result.get("ok") else str(result.get("error") or "the probe failed")
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        if lease:
            uids.kill_uid(lease.uid)
            lease.close()
        shutil.rmtree(root, ignore_errors=True)


@lru_cache(maxsize=1)
def detect() -> Isolation:
    """Probe once per process; see the module docstring for the order."""
    base = None if os.environ.get("EVOTUI_SANDBOX_NO_CGROUP") else find_pids_base()
    cg = {"pids_cgroup": base[0], "cgroup_version": base[1]} if base else {}
    abi = _landlock_abi()
    unshare = None if os.environ.get("EVOTUI_SANDBOX_NO_NAMESPACES") else shutil.which("unshare")
    tried = []
    if unshare:
        full = Isolation((unshare, "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child"),
                         True, True, mounts=True, drop_caps=True, landlock=abi, **cg)
        why = probe(full)
        if not why:
            return full
        tried.append(f"namespaces unavailable ({why})")
    if os.geteuid() == 0:
        by_uid = Isolation((), False, False, uid_switch=True, landlock=abi, **cg)
        why = probe(by_uid)
        if not why:
            return _noted(by_uid, tried)
        tried.append(f"uid switch unavailable ({why})")
    if unshare:
        # Network namespace only (no mount/PID namespace here): Landlock, if any, confines files.
        net = Isolation((unshare, "--user", "--map-root-user", "--net"), True, False, landlock=abi, drop_caps=True, **cg)
        why = probe(net)
        if not why or (not abi and "outside scratch" in why):
            return _noted(net, tried)
    if abi:
        ll = Isolation((), False, False, landlock=abi, drop_caps=os.geteuid() == 0, **cg)
        why = probe(ll)
        if not why:
            return _noted(ll, tried)
        tried.append(f"Landlock unavailable ({why})")
    return _noted(Isolation((), False, False, drop_caps=os.geteuid() == 0, **cg), tried)


def _noted(iso: Isolation, tried: list[str]) -> Isolation:
    if os.environ.get("EVOTUI_SANDBOX_NO_NAMESPACES"):
        tried = ["namespaces disabled by EVOTUI_SANDBOX_NO_NAMESPACES", *tried]
    return replace(iso, note="; ".join([describe(iso), *tried]))
