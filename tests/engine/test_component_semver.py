"""Per-component semantic versions (issue 36, Autogenesis §3.2): one patch bump per change of
that component, minor when the change is the run's new best on validation, major for the first
change after a restore that rolled commits back; numbers never change once committed."""

from __future__ import annotations

from engine.components.versions import VersionIndex, rollback_versions
from engine.components import Component
from engine.pool import ROLLED_BACK, Artifact, PoolChange


def _art(aid: str, parents: tuple[str, ...], version: int, score: float, status: str = "confirmed",
         **texts: str) -> Artifact:
    parts = tuple(Component(n, t) for n, t in texts.items())
    return Artifact(aid, "", parents, version, {"v0": score}, status="seed" if not parents else status,
                    components=parts)


SEED = _art("a0", (), 1, 0.5, system="s0", tool="t0")


def _versions(index: VersionIndex, name: str) -> list[tuple[str, str]]:
    return [(v.version, v.artifact_id) for v in index.history[name]]


def test_each_component_counts_its_own_changes_and_a_new_best_is_a_minor_bump() -> None:
    arts = [SEED,
            _art("a1", ("a0",), 2, 0.4, system="s1", tool="t0"),   # worse: patch of system only
            _art("a2", ("a1",), 3, 0.45, system="s1", tool="t1"),  # tool's first change: its own 1.0.1
            _art("a3", ("a2",), 4, 0.7, system="s2", tool="t1"),   # the new best: minor
            _art("a4", ("a3",), 5, 0.6, system="s3", tool="t2")]   # both change, not the best: patches
    index = VersionIndex(arts)
    assert _versions(index, "system") == [("1.0.0", "a0"), ("1.0.1", "a1"), ("1.1.0", "a3"), ("1.1.1", "a4")]
    assert _versions(index, "tool") == [("1.0.0", "a0"), ("1.0.1", "a2"), ("1.0.2", "a4")]
    assert index.of_artifact("a3")["tool"].version == "1.0.1"  # carried, not bumped


def test_the_first_change_after_a_rollback_is_a_major_bump_and_rolled_back_versions_stay() -> None:
    a1 = _art("a1", ("a0",), 2, 0.6, system="s1", tool="t0")
    a2 = _art("a2", ("a1",), 3, 0.55, status=ROLLED_BACK, system="s2", tool="t0")
    # Pool version 4 restored a1 and rolled a2 back (version 5); a3 and a4 came after.
    changes = [PoolChange(4, "restore", "a1", {"restore": True}),
               PoolChange(5, ROLLED_BACK, "a2", {"rolled_back": True, "restore_version": 4})]
    a3 = _art("a3", ("a1",), 6, 0.58, system="s3", tool="t0")
    a4 = _art("a4", ("a3",), 7, 0.59, system="s4", tool="t1")
    rollbacks = rollback_versions(changes)
    assert rollbacks == [4]
    index = VersionIndex([SEED, a1, a2, a3, a4], rollbacks)
    assert _versions(index, "system") == [("1.0.0", "a0"), ("1.1.0", "a1"), ("1.1.1", "a2"), ("2.0.0", "a3"),
                                          ("2.0.1", "a4")]
    assert _versions(index, "tool") == [("1.0.0", "a0"), ("2.0.0", "a4")]  # its first change since the restore
    assert index.rolled_back == {"a2"}
    # A restore that rolled nothing back (a hot-swap's) changes no number.
    assert rollback_versions([PoolChange(4, "restore", "a1", {"restore": True})]) == []
    assert _versions(VersionIndex([SEED, a1, a3]), "system")[-1] == ("1.1.1", "a3")
