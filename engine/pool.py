"""The versioned artifact pool.

Every committed change bumps `version` and appends a `PoolChange` to the changelog, so a stale
item can be shown exactly what changed since it was created (the reflective policy needs it).
Mutations are synchronous methods: under asyncio they cannot interleave, which is the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Artifact:
    artifact_id: str
    text: str
    parent_ids: tuple[str, ...]
    created_version: int
    val_scores: Mapping[str, float]
    status: str = "confirmed"
    created_at: float = 0.0
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def val_mean(self) -> float:
        if not self.val_scores:
            return 0.0
        return sum(self.val_scores.values()) / len(self.val_scores)


@dataclass(frozen=True)
class PoolChange:
    version: int
    kind: str
    artifact_id: str
    detail: Mapping[str, object]


class PoolError(Exception):
    pass


class Pool:
    def __init__(self) -> None:
        self._artifacts: dict[str, Artifact] = {}
        self._changelog: list[PoolChange] = []
        self.version = 0

    def __len__(self) -> int:
        return len(self._artifacts)

    def __contains__(self, artifact_id: str) -> bool:
        return artifact_id in self._artifacts

    def get(self, artifact_id: str) -> Artifact:
        try:
            return self._artifacts[artifact_id]
        except KeyError:
            raise PoolError(f"artifact {artifact_id!r} is not in the pool") from None

    def artifacts(self) -> list[Artifact]:
        return list(self._artifacts.values())

    def gap(self, item_version: int) -> int:
        return self.version - item_version

    def add(self, artifact: Artifact, detail: Mapping[str, object] | None = None) -> PoolChange:
        """Commit an artifact; returns the change (its version is the new pool version)."""
        if artifact.artifact_id in self._artifacts:
            raise PoolError(f"artifact {artifact.artifact_id!r} already in the pool")
        for parent in artifact.parent_ids:
            if parent not in self._artifacts:
                raise PoolError(f"parent {parent!r} of {artifact.artifact_id!r} is not in the pool")
        self.version += 1
        stored = Artifact(
            artifact_id=artifact.artifact_id,
            text=artifact.text,
            parent_ids=artifact.parent_ids,
            created_version=self.version,
            val_scores=MappingProxyType(dict(artifact.val_scores)),
            status=artifact.status,
            created_at=artifact.created_at,
            meta=MappingProxyType(dict(artifact.meta)),
        )
        self._artifacts[stored.artifact_id] = stored
        change = PoolChange(self.version, "add", stored.artifact_id, MappingProxyType(dict(detail or {})))
        self._changelog.append(change)
        return change

    def restore(self, artifacts: list[Artifact], changes: list[PoolChange]) -> None:
        """Rebuild from persisted state (resume); the changelog must be contiguous from 1."""
        changelog = sorted(changes, key=lambda c: c.version)
        for expected, change in enumerate(changelog, start=1):
            if change.version != expected:
                raise PoolError(f"pool changelog has a hole at version {expected}")
        self._artifacts = {a.artifact_id: a for a in artifacts}
        self._changelog = changelog
        self.version = changelog[-1].version if changelog else 0

    def set_status(self, artifact_id: str, status: str, val_scores: Mapping[str, float] | None = None,
                   detail: Mapping[str, object] | None = None) -> PoolChange:
        """Confirm or remove a speculative artifact; a pool change, so the version bumps.
        Removed artifacts stay readable (lineage) but are no longer selectable."""
        art = self.get(artifact_id)
        self.version += 1
        self._artifacts[artifact_id] = Artifact(
            artifact_id=art.artifact_id,
            text=art.text,
            parent_ids=art.parent_ids,
            created_version=art.created_version,
            val_scores=MappingProxyType(dict(val_scores if val_scores is not None else art.val_scores)),
            status=status,
            created_at=art.created_at,
            meta=art.meta,
        )
        change = PoolChange(self.version, status, artifact_id, MappingProxyType(dict(detail or {})))
        self._changelog.append(change)
        return change

    def live(self) -> list[Artifact]:
        """Selectable artifacts: seed, confirmed and speculative (not removed)."""
        return [a for a in self._artifacts.values() if a.status != "removed"]

    def confirmed(self) -> list[Artifact]:
        """Fully validated artifacts only (what `best()` and reports use)."""
        return [a for a in self._artifacts.values() if a.status in ("seed", "confirmed")]

    def changes_since(self, version: int) -> list[PoolChange]:
        """Changes with version > `version`, oldest first."""
        return self._changelog[version:] if version >= 0 else list(self._changelog)

    def best(self) -> Artifact | None:
        """Best fully validated artifact; speculative ones never lead before confirmation."""
        return _top(self.confirmed())

    def leader(self) -> Artifact | None:
        """Best selectable artifact, speculative ones included (scored on their prefix): what a
        stale item is rebased onto, so repairs build on the newest promising work."""
        return _top(self.live())


def _top(artifacts: list[Artifact]) -> Artifact | None:
    # Ties go to the older artifact: a newer one must be strictly better to lead.
    return max(artifacts, key=lambda a: (a.val_mean, -a.created_version), default=None)
