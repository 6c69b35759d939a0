"""Hot-swap: edit one component of a live run's active artifact (issue 15, item 4).

`hot_swap(handlers, component, text, reason, by)` runs on the driving loop (the control
socket's `edit_component` command awaits it):

1. checks: the active artifact (Pool.best, restores followed) has named components, the
   component exists, is evolvable (a frozen one, `evolvable = false`, is refused), the text is
   a non-empty string that differs and holds no component heading line, keeps the component's
   frozen regions verbatim and stays valid for its type (engine/components/__init__.py: refusal);
2. validates the edited artifact on the whole validation set with the kind's own rollouts
   (`handlers.validation_traces`: the prompt kind's task model, the adapter's evaluate; the
   metric calls are charged to the run's budget, as a merge's are), so it enters the pool scored
   like any commit;
3. commits it through the ledger (`Ledger.commit_edit`: pool version bump, lineage operator
   "edit", a pool_events row naming the component, who and why), so items in flight see it in the
   changelog and the staleness policies treat it as any commit; the next `max_in_flight` items
   admitted take it as their parent (`PinnedParents`; selection tag `hot_swap`), then the
   strategy's selector chooses again (a resume forgets the pin: the selector chooses);
4. makes it the active best through the ledger's restore (audited like `evotui restore`), so the
   edit is what the run now serves even when it scores lower;
5. writes an audit row (transition "hot_swap") with the component's new version, and waits for
   the store's writer to commit it all before it replies.

Every refusal raises HotSwapError before anything is written.
"""

from __future__ import annotations

import time

from engine import components
from engine.components.versions import VersionIndex
from engine.context import CallFailed
from engine.items import current_item
from engine.pool import Artifact, is_confirmed
from engine.strategy.protocols import Pick


class PinnedParents:
    """Mixed into PromptStages and AdapterStages (before KindHandlers): after a hot-swap the next admitted items
    take the edited artifact as their parent."""

    _pinned: tuple[str, int] | None = None

    def pin_parent(self, artifact_id: str, items: int) -> None:
        self._pinned = (artifact_id, items) if items > 0 else None

    def pick_parent(self) -> Pick:
        if self._pinned is not None:
            artifact_id, left = self._pinned
            self._pinned = (artifact_id, left - 1) if left > 1 else None
            if artifact_id in self.ctx.pool and is_confirmed(self.ctx.pool.get(artifact_id)):
                return Pick(artifact_id, {"hot_swap": artifact_id})
        return super().pick_parent()


class HotSwapError(ValueError):
    """A refused edit; the message names the problem."""


def check_edit(base: Artifact | None, component: object, text: object) -> components.Components:
    """The edited components of `base`, or HotSwapError."""
    if base is None:
        raise HotSwapError("the run has no validated artifact yet; wait for the seed's evaluation")
    if base.components is None:
        raise HotSwapError(f"the active artifact {base.artifact_id} has no named components ([[component]] tables); "
                           "nothing to edit by name")
    names = [c.name for c in base.components]
    if not isinstance(component, str) or component not in names:
        raise HotSwapError(f"no component {component!r} in the active artifact {base.artifact_id} (its components: "
                           f"{', '.join(names)})")
    part = next(c for c in base.components if c.name == component)
    if not part.evolvable:
        raise HotSwapError(f"component {component!r} is frozen (evolvable = false in the task): it cannot be edited")
    if not isinstance(text, str) or not text.strip():
        raise HotSwapError(f"the new text of {component!r} must be a non-empty string")
    if components.has_header_line(text, names):
        raise HotSwapError(f"the new text of {component!r} holds a component heading line (## [name])")
    if text.strip() == part.text.strip():
        raise HotSwapError(f"the new text of {component!r} is the text it has: nothing to change")
    refused = components.refusal(part, text.strip())
    if refused is not None:  # the rules a proposal's update obeys (a frozen region, the type's syntax)
        raise HotSwapError(f"the new text of component {refused[1]}; nothing was changed")
    return components.replace(base.components, {component: text})


async def hot_swap(handlers, component: object, text: object, reason: str, by: str) -> dict:
    """Edit `component` of the active artifact (see the module docstring); a dict for the reply."""
    ctx = handlers.ctx
    base = ctx.pool.best()
    parts = check_edit(base, component, text)
    rendering = components.render(parts)
    current_item.set(None)
    try:
        traces = await handlers.validation_traces(parts)  # HotSwapError from a kind without components
    except CallFailed as exc:  # a kind's own refusal (HotSwapError) passes through as it is
        raise HotSwapError(f"the edited artifact could not be validated ({exc}); nothing was changed") from None
    base_now = ctx.pool.get(base.artifact_id)  # still in the pool: validated artifacts are never removed
    art = Artifact(artifact_id=f"h{ctx.pool.version + 1:06d}", text=rendering, parent_ids=(base_now.artifact_id,),
                   created_version=0, val_scores={t["example_id"]: t["score"] for t in traces},
                   created_at=time.time(),
                   meta={"hot_swap": {"component": component, "by": by, "reason": reason},
                         "changed_components": [component]},
                   components=parts)
    detail = {"component": component, "by": by, "reason": reason}
    stored = handlers.ledger.commit_edit(art, {t["example_id"]: t["feedback"] for t in traces}, detail)
    handlers.ledger.restore(stored.artifact_id, reason or f"hot-swap of {component}", by=by,
                            previous_id=base_now.artifact_id)
    handlers.pin_parent(stored.artifact_id, ctx.config.pipeline.max_in_flight)
    version = VersionIndex.of_pool(ctx.pool).of_artifact(stored.artifact_id)[component]
    ctx.store.insert_audit(ctx.run_id, item_id=stored.artifact_id, transition="hot_swap", component=component,
                           decision="committed", reason=reason or None,
                           detail={"by": by, "parent_id": base_now.artifact_id, "version": version.version,
                                   "parent_version": version.parent_version, "val_mean": stored.val_mean,
                                   "parent_val_mean": base_now.val_mean, "pool_version": ctx.pool.version},
                           created_at=time.time())
    await ctx.store.flush()  # the reply means the edit is on disk: a kill after it keeps the version
    return {"artifact_id": stored.artifact_id, "component": component, "version": version.version,
            "parent_id": base_now.artifact_id, "val_mean": stored.val_mean, "pool_version": ctx.pool.version}
