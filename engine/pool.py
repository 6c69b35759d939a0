"""The versioned artifact pool.

Every committed change bumps `version` and appends a `PoolChange` to the changelog, so a stale
item can be shown exactly what changed since it was created (the reflective policy needs it).
Mutations are synchronous methods: under asyncio they cannot interleave, which is the lock.
Derived structures (the Pareto fronts, the best artifacts) are kept current on every change,
so reading them costs nothing like a scan of the pool, which grows all run long.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Hashable, Iterable, Mapping, Protocol, TypeVar

from engine.components import Component, Components, parse_rendering


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
    components: Components | None = None
    """Named parts (engine/components/__init__.py); None = one implicit component, `text`. When set,
    `text` is their rendering, so readers that need one string never look here. `Pool.add`
    reads them back from the text of an artifact that brings none when its first parent has
    some (an artifact built from its text alone)."""

    @property
    def parts(self) -> Components:
        """The components, the one-component case included (named "text", evolvable)."""
        return self.components if self.components is not None else (Component("text", self.text),)

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


ROLLED_BACK = "rolled_back"
"""The status of a validated artifact a restore rolled back (committed after the restored one):
kept for its lineage and versions, no longer selectable nor the best (engine/run/admin.py)."""


def is_live(artifact: Artifact) -> bool:
    """Selectable: seed, confirmed and speculative (not removed, not rolled back)."""
    return artifact.status not in ("removed", ROLLED_BACK)


def is_confirmed(artifact: Artifact) -> bool:
    """Fully validated."""
    return artifact.status in ("seed", "confirmed")


class PoolIndex(Protocol):
    """A structure derived from the pool, told each artifact's new state as it is committed."""

    def apply(self, artifact: Artifact) -> None: ...


IndexT = TypeVar("IndexT", bound=PoolIndex)


class TopIndex:
    """The best artifact `member` accepts, by (val_mean, -created_version), then pool order: a
    heap with lazy deletion, O(log n) per change instead of a scan (and mean) of every artifact."""

    def __init__(self, member: Callable[[Artifact], bool], artifacts: Iterable[Artifact] = ()) -> None:
        self._member = member
        self._seq: dict[str, int] = {}
        self._entry: dict[str, tuple[float, int, int, str]] = {}  # each member's current heap entry
        self._heap: list[tuple[float, int, int, str]] = []
        self._artifacts: dict[str, Artifact] = {}
        for art in artifacts:
            self.apply(art)

    def apply(self, artifact: Artifact) -> None:
        aid = artifact.artifact_id
        seq = self._seq.setdefault(aid, len(self._seq))
        self._entry.pop(aid, None)
        self._artifacts.pop(aid, None)
        if self._member(artifact):
            entry = (-artifact.val_mean, artifact.created_version, seq, aid)
            self._entry[aid] = entry
            self._artifacts[aid] = artifact
            heapq.heappush(self._heap, entry)

    def top(self) -> Artifact | None:
        heap = self._heap
        while heap and self._entry.get(heap[0][3]) != heap[0]:
            heapq.heappop(heap)  # superseded or no longer a member
        return self._artifacts[heap[0][3]] if heap else None


class Pool:
    def __init__(self) -> None:
        self._artifacts: dict[str, Artifact] = {}
        self._changelog: list[PoolChange] = []
        self._indexes: dict[Hashable, PoolIndex] = {}
        self._builders: dict[Hashable, Callable[[Iterable[Artifact]], PoolIndex]] = {}
        self._best = self.index(("top", "confirmed"), lambda arts: TopIndex(is_confirmed, arts))
        self._leader = self.index(("top", "live"), lambda arts: TopIndex(is_live, arts))
        self.version = 0
        self.restored: PoolChange | None = None
        """The newest restore (see `best()`)."""
        self._since_restore: Artifact | None = None
        """The best validated artifact committed or confirmed after that restore."""

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

    def index(self, key: Hashable, build: Callable[[Iterable[Artifact]], IndexT]) -> IndexT:
        """The derived structure under `key`: built from the artifacts (pool order) on first use,
        then told every change. Reading it must not mutate the pool."""
        found = self._indexes.get(key)
        if found is None:
            found = self._indexes[key] = build(self._artifacts.values())
            self._builders[key] = build
        return found  # type: ignore[return-value]  # the key's builder fixes its type

    def indexes(self) -> list[PoolIndex]:
        """The derived structures built so far (the ledger reads the island fold's migrations)."""
        return list(self._indexes.values())

    def _committed(self, artifact: Artifact) -> None:
        self._artifacts[artifact.artifact_id] = artifact
        for index in self._indexes.values():
            index.apply(artifact)
        if self.restored is not None and is_confirmed(artifact):
            self._since_restore = top_of(a for a in (self._since_restore, artifact) if a is not None)

    def _logged(self, change: PoolChange) -> PoolChange:
        self._changelog.append(change)
        if is_restore(change):
            self.restored, self._since_restore = change, None
        return change

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
            components=artifact.components if artifact.components is not None else self._inherited(artifact),
        )
        self._committed(stored)
        return self._logged(PoolChange(self.version, "add", stored.artifact_id, MappingProxyType(dict(detail or {}))))

    def _inherited(self, artifact: Artifact) -> Components | None:
        """Components read back from the text with the first parent's names, for an artifact
        built from its text alone (the speculative insert): its text is then a rendering."""
        if not artifact.parent_ids:
            return None
        template = self._artifacts[artifact.parent_ids[0]].components
        return parse_rendering(artifact.text, template) if template is not None else None

    def restore(self, artifacts: list[Artifact], changes: list[PoolChange]) -> None:
        """Rebuild from persisted state (resume); the changelog must be contiguous from 1."""
        changelog = sorted(changes, key=lambda c: c.version)
        for expected, change in enumerate(changelog, start=1):
            if change.version != expected:
                raise PoolError(f"pool changelog has a hole at version {expected}")
        self._artifacts = {a.artifact_id: a for a in artifacts}
        self._indexes = {key: build(self._artifacts.values()) for key, build in self._builders.items()}
        self._best = self.index(("top", "confirmed"), lambda arts: TopIndex(is_confirmed, arts))
        self._leader = self.index(("top", "live"), lambda arts: TopIndex(is_live, arts))
        self._changelog = changelog
        self.version = changelog[-1].version if changelog else 0
        restores = [c for c in changelog if is_restore(c)]
        self.restored = restores[-1] if restores else None
        after = {c.artifact_id for c in changelog[self.restored.version:]} if self.restored else set()
        self._since_restore = top_of(a for aid in after if is_confirmed(a := self._artifacts[aid]))

    def set_status(self, artifact_id: str, status: str, val_scores: Mapping[str, float] | None = None,
                   detail: Mapping[str, object] | None = None, meta: Mapping[str, object] | None = None) -> PoolChange:
        """Confirm or remove a speculative artifact; a pool change, so the version bumps.
        Removed artifacts stay readable (lineage) but are no longer selectable. `meta`: keys the
        confirmation adds (a program's metrics and feedback, known only once its cascade ended)."""
        art = self.get(artifact_id)
        self.version += 1
        self._committed(Artifact(
            artifact_id=art.artifact_id,
            text=art.text,
            parent_ids=art.parent_ids,
            created_version=art.created_version,
            val_scores=MappingProxyType(dict(val_scores if val_scores is not None else art.val_scores)),
            status=status,
            created_at=art.created_at,
            meta=MappingProxyType({**art.meta, **meta}) if meta else art.meta,
            components=art.components,
        ))
        return self._logged(PoolChange(self.version, status, artifact_id, MappingProxyType(dict(detail or {}))))

    def live(self) -> list[Artifact]:
        """Selectable artifacts: seed, confirmed and speculative (not removed)."""
        return [a for a in self._artifacts.values() if is_live(a)]

    def confirmed(self) -> list[Artifact]:
        """Fully validated artifacts only (what `best()` and reports use)."""
        return [a for a in self._artifacts.values() if is_confirmed(a)]

    def changes_since(self, version: int) -> list[PoolChange]:
        """Changes with version > `version`, oldest first."""
        return self._changelog[version:] if version >= 0 else list(self._changelog)

    def best(self) -> Artifact | None:
        """The run's active best: the best fully validated artifact (speculative ones never lead
        before confirmation); after a restore, the restored artifact unless one committed or
        confirmed since is strictly better (ties go to the older one)."""
        if self.restored is None:
            return self._best.top()
        return top_of(a for a in (self._artifacts[self.restored.artifact_id], self._since_restore) if a is not None)

    def leader(self) -> Artifact | None:
        """Best selectable artifact, speculative ones included (scored on their prefix): what a
        stale item is rebased onto, so repairs build on the newest promising work."""
        return self._leader.top()


RESTORE = "restore"
"""A pool change that makes an earlier validated artifact the active best again (the ledger's
`restore`): a status change to its own status whose detail says so."""


def is_restore(change: PoolChange) -> bool:
    return change.kind == RESTORE or bool(change.detail.get(RESTORE))


def top_of(artifacts: Iterable[Artifact]) -> Artifact | None:
    """What `best()`/`leader()` answer, from scratch. Ties go to the older artifact: a newer one
    must be strictly better to lead."""
    return max(artifacts, key=lambda a: (a.val_mean, -a.created_version), default=None)
