"""What evaluated code may read (enforced with Landlock where the kernel has it).

Allowed: the system's programs and libraries, the interpreter with its packages (the directories
its site-packages' .pth files add included), the sandbox's own
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


def pth_dirs(site_dirs: list[str]) -> list[str]:
    """Directories the .pth files of site_dirs put on the import path (a venv sharing another's
    packages, a legacy editable install): the interpreter's packages too, so they stay readable."""
    out: list[str] = []
    for site_dir in site_dirs:
        try:
            names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                lines = Path(site_dir, name).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue  # site.py runs import lines; they name no directory
                path = os.path.join(site_dir, line)
                if os.path.isdir(path):
                    out.append(os.path.realpath(path))
    return out


def _interpreter(python: str) -> list[str]:
    real = os.path.realpath(python)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(real).parent.parent), str(Path(python).parent.parent)}
    try:
        site_dirs = site.getsitepackages()
    except AttributeError:
        site_dirs = []  # a site module without it (some embedded builds)
    paths.update(site_dirs)
    paths.update(pth_dirs(site_dirs))
    return sorted(paths)


def readable_paths(python: str, task_dir: Path, support_dir: Path, declared: tuple[str, ...] = ()) -> list[str]:
    """Every path evaluated code may read beneath (scratch is added by the runner as writable)."""
    wanted = [*SYSTEM, *_etc(), *_interpreter(python), str(support_dir), str(task_dir),
              *(os.path.expanduser(p) for p in declared)]
    # "/" (an interpreter installed at the root) would allow everything: never a rule.
    return [p for p in dict.fromkeys(os.path.abspath(p) for p in wanted) if p != "/" and os.path.exists(p)]
