"""Files a run hands its trackers at the end: its best artifact and its EvoTrace export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from engine.pool import Artifact


def write_artifacts(db_path: Path, run_id: str, best: Artifact | None, folder: Path) -> list[tuple[str, Path]]:
    """(name, path) pairs written under `folder`. Blocking: run it on a thread."""
    from engine.store.store import Store
    from engine.trace import collect, export

    folder.mkdir(parents=True, exist_ok=True)
    out: list[tuple[str, Path]] = []
    if best is not None:
        best_dir = folder / "best"
        best_dir.mkdir(exist_ok=True)
        (best_dir / "best.txt").write_text(best.text, encoding="utf-8")
        (best_dir / "best.json").write_text(json.dumps({
            "artifact_id": best.artifact_id, "val_mean": best.val_mean, "parent_ids": list(best.parent_ids),
            "components": {c.name: c.text for c in best.parts}}, indent=1) + "\n", encoding="utf-8")
        out.append(("best", best_dir))

    async def read():
        store = await Store.open(db_path, create=False, readonly=True)
        try:
            return await collect.collect(store, run_id)
        finally:
            await store.close()

    target = folder / "evotrace"
    if target.exists():
        import shutil

        shutil.rmtree(target)
    export.write_evotrace(asyncio.run(read()), target)
    out.append(("evotrace", target))
    return out
