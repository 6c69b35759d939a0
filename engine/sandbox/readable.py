"""What evaluated code may read (enforced with Landlock where the kernel has it).

Allowed: the system's programs and libraries, the interpreter with its packages, the sandbox's own
support files, the task folder, the evaluation's scratch (writable) and the paths a task declares
(`[program] eval_read_paths`, for toolchains and caches in a home directory). Everything else is
out of reach: the run database, home directories and their key files, other evaluations' scratch,
and the secrets under /etc (shadow files, SSH host keys, TLS private keys).
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/proc", "/sys", "/dev",
          "/nix", "/snap", "/gnu", "/var/cache", "/var/lib/ca-certificates")
"""Programs, libraries and what they read at start-up; /proc and /dev are the evaluation's own where
the sandbox has namespaces, and Landlock keeps other processes' /proc entries unreadable elsewhere."""
ETC_SECRETS = frozenset({"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "security",
                         "credstore", "credstore.encrypted", "docker", "NetworkManager", "wireguard", "ipsec.secrets"})
ETC_KEY_FOLDERS = frozenset({"ssl", "pki"})
"""Readable except their `private` folders (TLS keys)."""


def _etc(root: str = "/etc") -> list[str]:
    out: list[str] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for name in names:
        if name in ETC_SECRETS:
            continue
        path = os.path.join(root, name)
        if name in ETC_KEY_FOLDERS and os.path.isdir(path):
            out.extend(os.path.join(path, sub) for sub in sorted(os.listdir(path)) if sub != "private")
        else:
            out.append(path)
    return out


def _interpreter(python: str) -> list[str]:
    real = os.path.realpath(python)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(real).parent.parent), str(Path(python).parent.parent)}
    try:
        paths.update(site.getsitepackages())
    except AttributeError:
        pass  # a site module without it (some embedded builds)
    return sorted(paths)


def readable_paths(python: str, task_dir: Path, support_dir: Path, declared: tuple[str, ...] = ()) -> list[str]:
    """Every path evaluated code may read beneath (scratch is added by the runner as writable)."""
    wanted = [*SYSTEM, *_etc(), *_interpreter(python), str(support_dir), str(task_dir),
              *(os.path.expanduser(p) for p in declared)]
    # "/" (an interpreter installed at the root) would allow everything: never a rule.
    return [p for p in dict.fromkeys(os.path.abspath(p) for p in wanted) if p != "/" and os.path.exists(p)]
