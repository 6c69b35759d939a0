"""The task folder as it travels to Ray workers: packed once on the driver, put in the object
store once per run, unpacked once per worker machine (a folder named by its digest, written
to a private temporary name and renamed into place, so concurrent workers never see half a
folder).

The evaluator's folder travels whole (evaluators import sibling modules and read data files),
except caches and version control; a folder over MAX_BYTES is refused with the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_BYTES = 512 * 1024 * 1024
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


class ShippingError(Exception):
    """The task folder cannot travel (too large, unreadable, unsafe name)."""


@dataclass(frozen=True)
class TaskBundle:
    digest: str
    files: tuple[tuple[str, bytes, int], ...]
    """(relative POSIX path, content, mode bits)."""

    @property
    def size(self) -> int:
        return sum(len(data) for _, data, _ in self.files)


def pack(folder: Path, max_bytes: int = MAX_BYTES) -> TaskBundle:
    folder = Path(folder).resolve()
    files: list[tuple[str, bytes, int]] = []
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue  # a link could point anywhere on the driver; only real files travel
            rel = path.relative_to(folder).as_posix()
            try:
                data = path.read_bytes()
                mode = path.stat().st_mode & 0o755
            except OSError as exc:
                raise ShippingError(f"cannot read {path} to send it to the Ray workers ({exc})") from None
            total += len(data)
            if total > max_bytes:
                raise ShippingError(f"the task folder {folder} is over {max_bytes // (1024 * 1024)} MB; move large "
                                    "data out of it (workers would download it for every run)")
            files.append((rel, data, mode))
    digest = hashlib.sha256()
    for rel, data, mode in files:
        digest.update(f"{rel}\0{mode}\0{len(data)}\0".encode())
        digest.update(data)
    return TaskBundle(digest.hexdigest()[:24], tuple(files))


def _safe(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ShippingError(f"refusing to unpack {rel!r}: not a plain relative path")
    return path


def folder_for(root: Path, digest: str) -> Path:
    return Path(root) / f"evotui-task-{digest}"


def unpack(bundle: TaskBundle, root: Path) -> Path:
    """The bundle's folder under root, written now unless an earlier task already did."""
    target = folder_for(root, bundle.digest)
    if target.is_dir():
        return target
    Path(root).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".evotui-task-{bundle.digest}-", dir=root))
    try:
        for rel, data, mode in bundle.files:
            dest = staging.joinpath(*_safe(rel).parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            dest.chmod(mode | 0o444)
        staging.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race with another worker: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
