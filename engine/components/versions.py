"""Immutable versions of a run's named components (issue 15, Autogenesis's versioned resources).

A version is a pure function of the run's committed artifacts (status seed or confirmed, in
commit order: the pool version each was added at, then its id), so it needs no table of its own,
is the same live and after a resume (the pool is rebuilt from the same rows; a kill -9 loses no
version that a committed artifact carries) and never changes once its artifact is committed:

- the seed's components are 1.0.0;
- a committed artifact whose component text equals one of its parents' carries that version;
- otherwise the component gets its own next version, counted per component from the newest
  version it has (its first parent's version is the `parent_version`), by this rule:
  major (X+1.0.0): the component's first change after a restore that rolled commits back
  (engine/run/admin.py; the rolled_back pool events say when);
  minor (X.Y+1.0): the change made its artifact the run's new best on validation (the
  held-out set selection scores on: a validation mean above every earlier commit's);
  patch (X.Y.Z+1): any other change.

A one-string artifact is one component named "text". A version is written NAME@X.Y.Z.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from engine.pool import ROLLED_BACK, Artifact, is_confirmed

ONE_TEXT = "text"
_SPEC = re.compile(r"^([A-Za-z0-9_.-]+)@(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class ComponentVersion:
    component: str
    version: str
    artifact_id: str
    """The committed artifact that introduced this version."""
    text: str
    parent_version: str | None
    pool_version: int
    evolvable: bool = True

    @property
    def spec(self) -> str:
        return f"{self.component}@{self.version}"

    def to_dict(self) -> dict:
        return {"component": self.component, "version": self.version, "artifact_id": self.artifact_id,
                "parent_version": self.parent_version, "pool_version": self.pool_version,
                "evolvable": self.evolvable, "text": self.text}


def parse_spec(spec: str) -> tuple[str, str] | None:
    """(component, "X.Y.Z") of NAME@X.Y.Z, or None if `spec` is not one."""
    m = _SPEC.match(spec.strip())
    return (m.group(1), f"{m.group(2)}.{m.group(3)}.{m.group(4)}") if m else None


def _parts(art: Artifact) -> list[tuple[str, str, bool]]:
    if art.components is None:
        return [(ONE_TEXT, art.text, True)]
    return [(c.name, c.text, c.evolvable) for c in art.components]


def committed_order(artifacts: Iterable[Artifact]) -> list[Artifact]:
    """Validated artifacts in commit order, rolled-back ones included: a restore leaves every
    version that was ever committed as it was (readers pass the pool's artifacts(), not confirmed())."""
    return sorted((a for a in artifacts if is_confirmed(a) or a.status == ROLLED_BACK),
                  key=lambda a: (a.created_version, a.artifact_id))


def rollback_versions(changes: Iterable) -> list[int]:
    """Pool versions of the restores that rolled commits back, from a run's pool changes (the
    rolled_back rows name their restore); a restore that rolled nothing back (a hot-swap's) is none."""
    return sorted({int(c.detail["restore_version"]) for c in changes
                   if c.kind == ROLLED_BACK and c.detail.get("restore_version") is not None})


class VersionIndex:
    """Every version of every component of a run, and which version each artifact carries."""

    def __init__(self, artifacts: Iterable[Artifact], rollbacks: Iterable[int] = ()) -> None:
        """rollbacks: pool versions of the restores that rolled commits back (rollback_versions)."""
        self.history: dict[str, list[ComponentVersion]] = {}
        self.carried: dict[str, dict[str, ComponentVersion]] = {}
        arts = committed_order(artifacts)
        self.rolled_back = frozenset(a.artifact_id for a in arts if a.status == ROLLED_BACK)
        """Artifacts a restore rolled back: their versions stay, marked, out of the search."""
        restores = sorted(rollbacks)
        newest: dict[str, tuple[tuple[int, int, int], int]] = {}  # component -> (its newest version, pool version)
        record = float("-inf")  # the best validation mean committed so far
        for art in arts:
            mine: dict[str, ComponentVersion] = {}
            parents = [self.carried[p] for p in art.parent_ids if p in self.carried]
            new_best = art.val_mean > record
            record = max(record, art.val_mean)
            for name, text, evolvable in _parts(art):
                same = next((p[name] for p in parents if name in p and p[name].text.strip() == text.strip()), None)
                if same is not None:
                    mine[name] = same
                    continue
                (major, minor, patch), since = newest.get(name, ((1, 0, 0), 0))
                if not parents:
                    number = (1, 0, 0)
                elif any(since < r < art.created_version for r in restores):
                    number = (major + 1, 0, 0)
                elif new_best:
                    number = (major, minor + 1, 0)
                else:
                    number = (major, minor, patch + 1)
                newest[name] = (number, art.created_version)  # above every earlier version of it
                version = ".".join(map(str, number))
                first = parents[0].get(name) if parents else None
                cv = ComponentVersion(name, version, art.artifact_id, text, first.version if first else None,
                                      art.created_version, evolvable)
                self.history.setdefault(name, []).append(cv)
                mine[name] = cv
            self.carried[art.artifact_id] = mine

    @classmethod
    def of_pool(cls, pool) -> "VersionIndex":
        """The versions of a live run's pool (engine.pool.Pool)."""
        return cls(pool.artifacts(), rollback_versions(pool.changes_since(0)))

    def find(self, component: str, version: str) -> ComponentVersion | None:
        return next((v for v in self.history.get(component, []) if v.version == version), None)

    def of_artifact(self, artifact_id: str) -> dict[str, ComponentVersion]:
        return dict(self.carried.get(artifact_id, {}))


def diff(a: ComponentVersion, b: ComponentVersion) -> str:
    """Unified diff from version `a` to version `b` of one component."""
    return "\n".join(difflib.unified_diff(a.text.splitlines(), b.text.splitlines(), a.spec, b.spec, lineterm=""))


def describe(history: Sequence[ComponentVersion], active: str | None,
             rolled_back: frozenset[str] = frozenset()) -> list[str]:
    """One line per version: the version, its artifact, its parent version, the active marker,
    and whether a restore rolled its artifact back."""
    return [f"{'*' if v.version == active else ' '} {v.spec:<28} {v.artifact_id}  from {v.parent_version or '-':<8} "
            f"pool v{v.pool_version}{'' if v.evolvable else '  (frozen)'}"
            f"{'  (rolled back)' if v.artifact_id in rolled_back else ''}" for v in history]


# -- read-side views (the TUI's components screen) ----------------------------------------------
@dataclass(frozen=True)
class ComponentEntry:
    """One component of a run: its kind, whether it may evolve, its versions newest first and the
    version the active artifact carries."""
    name: str
    type: str | None
    evolvable: bool
    frozen_regions: int
    versions: tuple[ComponentVersion, ...]
    active: str | None


@dataclass(frozen=True)
class ComponentsView:
    """Every named component of a run with its versions, and the active artifact (Pool.best,
    restores followed)."""
    active_id: str | None
    components: tuple[ComponentEntry, ...]
    index: VersionIndex

    def entry(self, name: str) -> ComponentEntry | None:
        return next((c for c in self.components if c.name == name), None)

    def find(self, name: str, version: str) -> ComponentVersion | None:
        return self.index.find(name, version)

    def parent(self, cv: ComponentVersion) -> ComponentVersion | None:
        return self.index.find(cv.component, cv.parent_version) if cv.parent_version else None

    def active(self, name: str) -> ComponentVersion | None:
        return self.index.of_artifact(self.active_id).get(name) if self.active_id else None


def components_view(artifacts: Iterable[Artifact], active_id: str | None,
                    rollbacks: Iterable[int] = ()) -> ComponentsView | None:
    """The components of a run's artifacts; None when none has named components (a one-string
    run has nothing to show by name). Type and frozen regions come from the active artifact's
    Component (else the newest committed one naming it)."""
    arts = committed_order(artifacts)
    if not any(a.components is not None for a in arts):
        return None
    index = VersionIndex(arts, rollbacks)
    by_id = {a.artifact_id: a for a in arts}
    sources = [by_id[active_id]] if active_id in by_id else []
    sources += [a for a in reversed(arts) if a.components is not None]
    active = index.of_artifact(active_id) if active_id else {}
    entries = []
    for name, history in index.history.items():
        part = next((c for a in sources for c in a.components or () if c.name == name), None)
        entries.append(ComponentEntry(
            name=name, type=part.type if part is not None else None, evolvable=history[-1].evolvable,
            frozen_regions=len(part.frozen) if part is not None else 0, versions=tuple(reversed(history)),
            active=active[name].version if name in active else None))
    return ComponentsView(active_id, tuple(entries), index)


@dataclass(frozen=True)
class VersionAudit:
    """The audit rows behind one component version: the transitions of the proposal (or the
    hot-swap) that made it, and the proposals on the same component started from an artifact
    carrying it that did not commit (rejected, failed, discarded), each as its rows in order."""
    made: tuple[dict, ...]
    attempts: tuple[tuple[dict, ...], ...]


def _detail(row: dict) -> dict:
    return row.get("detail") or {}


def version_audit(rows: Sequence[dict], view: ComponentsView, cv: ComponentVersion) -> VersionAudit:
    """Select from a run's audit rows (store.fetch_rows("audit", ...)) those about `cv`."""
    by_item: dict[str, list[dict]] = {}
    for r in rows:
        by_item.setdefault(str(r["item_id"]), []).append(r)
    made: list[dict] = []
    attempts: list[tuple[dict, ...]] = []
    for item_rows in by_item.values():
        if any(r["transition"] == "hot_swap" and r["item_id"] == cv.artifact_id and r["component"] == cv.component
               for r in item_rows):
            made.extend(item_rows)
            continue
        if any(r["transition"] == "commit" and _detail(r).get("artifact_id") == cv.artifact_id
               and cv.component in (_detail(r).get("versions") or {}) for r in item_rows):
            made.extend(item_rows)
            continue
        parent = next((_detail(r).get("parent_id") for r in item_rows if r["transition"] == "reflect"), None)
        if (parent and item_rows[-1]["decision"] != "accepted" and item_rows[0]["component"] == cv.component
                and view.index.of_artifact(str(parent)).get(cv.component) == cv):
            attempts.append(tuple(item_rows))
    return VersionAudit(tuple(made), tuple(attempts))


def active_artifact(artifacts: Sequence[Artifact], changes: Sequence) -> str | None:
    """The active artifact of stored rows (Pool.best with restores followed), as `evotui
    components` decides it; None when the rows do not rebuild a pool."""
    from engine.pool import Pool, PoolError

    pool = Pool()
    try:
        pool.restore(list(artifacts), list(changes))
    except PoolError:
        return None
    best = pool.best()
    return best.artifact_id if best else None
