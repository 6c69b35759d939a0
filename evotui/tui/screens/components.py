"""The components of a run of named components (issue 15): each component with its kind, its
evolvable / frozen flag and its versions newest first (★ the version the active artifact carries);
the selected version's diff against its parent version (or the active one) and the audit records
of the transitions that made it. Restore and hot-swap act through the backend, in a worker on the
UI loop (the live engine shares it; attach goes through the control socket), after a
confirmation; a read-only view refuses them with a notice."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option, OptionDoesNotExist
from textual.worker import Worker, WorkerState

from engine.components.versions import ComponentsView, ComponentVersion, version_audit
from evotui.tui.backend import BackendError, Frame
from evotui.tui.keymap import COMPONENTS_BINDINGS, EDIT_BINDINGS
from evotui.tui.screens.base import ConfirmScreen, EvoScreen, ReasonScreen
from evotui.tui.widgets.components import audit_text, component_label, version_label
from evotui.tui.widgets.diffview import DIFF_NAV_BINDINGS, DiffNavigation, DiffView, changed_note


@dataclass
class AuditLoaded(Message):
    rows: list[dict] | None
    error: str = ""


@dataclass
class ActionDone(Message):
    text: str
    error: str = ""


AUDIT_REFRESH_S = 2.0
"""Least time between two reads of the audit rows while the pool moves (each reads them all)."""
clock = time.monotonic


def _option_id(name: str, version: str | None = None) -> str:
    return f"v:{name}@{version}" if version else f"c:{name}"


class ComponentsScreen(DiffNavigation, EvoScreen):
    BINDINGS = COMPONENTS_BINDINGS + DIFF_NAV_BINDINGS
    HELP = """\
## Components
The run's named components: kind, **evolvable** or **frozen**, and every version newest first
(NAME@1.0.N; ★ marks the version the active artifact carries: the pool's best, restores
followed). The selected version's diff against its parent version (**v**: against the active
version) and, below, the audit records of the transitions that made it (reflect, select,
improve, evaluate, commit; strategy sepl) and the attempts from it that did not commit.
**r** restores the selected version (its artifact becomes the active best again, through the
ledger, as `evotui restore` does); **e** edits the selected component of the live run's active
artifact (a hot-swap: validated, committed as a new version, made active). Both ask first; a
read-only view does not offer them. **a** selects the active version, **m** switches unified / split.
"""

    def __init__(self) -> None:
        super().__init__()
        self.view: ComponentsView | None = None
        self.against_active = False
        self.rows: list[dict] | None = None
        self.loaded = False
        self.loading = False
        self._loaded_version: int | None = None
        self._read_at = float("-inf")
        self.retry_timer: Timer | None = None
        self.busy = ""
        """The restore or hot-swap under way (one at a time)."""
        self._shown: tuple | None = None

    def body(self) -> ComposeResult:
        with Horizontal(id="components-split"):
            yield OptionList(id="components-list")
            with Vertical(id="components-right"):
                yield DiffView(id="components-diff")
                with VerticalScroll(id="audit-box") as box:
                    box.border_title = "audit"
                    yield Static("", id="audit")

    # -- data ------------------------------------------------------------------------------
    def refresh_body(self, frame: Frame, app) -> None:
        version = frame.snap.pool_version
        if version != self._loaded_version and not self.loading:
            wait = self._read_at + AUDIT_REFRESH_S - clock()
            if wait <= 0:
                self._load_audit(version)
            elif self.retry_timer is None:
                # A quiet sampler may apply no other frame: read again when the interval is over.
                self.retry_timer = self.set_timer(wait, self._retry, name="audit-retry")
        self.query_one("#audit-box").border_subtitle = (
            "" if app.can_control else "read-only view · `evotui restore RUN NAME@X.Y.Z` restores a stored run")
        view = app.backend.components()
        if view is None:
            self.query_one("#audit", Static).update(
                "No committed artifact yet: the seed is being evaluated." if app.backend.has_components else
                "This run's artifacts have no named components ([[component]] tables in task.toml).")
            return
        if view is not self.view:
            self.view = view
            self._rebuild()
        self.show_selected()

    def _retry(self) -> None:
        self.retry_timer = None
        frame = self.app.sampler.frame
        if frame is not None and not self.loading:
            self._load_audit(frame.snap.pool_version)

    def _load_audit(self, version: int) -> None:
        if self.retry_timer is not None:
            self.retry_timer.stop()
            self.retry_timer = None
        self.loading = True
        self._loaded_version = version
        self._read_at = clock()
        self.run_worker(self._read_audit(), name="audit", group="components-audit", exclusive=True,
                        exit_on_error=False, description="read the run's audit rows")

    async def _read_audit(self) -> None:
        try:
            rows = await self.app.backend.audit_rows()
        except BackendError as exc:
            self.post_message(AuditLoaded(None, str(exc)))
            return
        self.post_message(AuditLoaded(rows))

    @on(AuditLoaded)
    def _audit_loaded(self, message: AuditLoaded) -> None:
        self.loading, self.loaded, self.rows = False, True, message.rows
        if message.error:
            self.notify(message.error, severity="error", timeout=8)
        self._shown = None
        self.show_selected()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # An unexpected failure still ends the read or the action, and says why.
        if event.state != WorkerState.ERROR:
            return
        if event.worker.group == "components-audit":
            event.stop()
            self.post_message(AuditLoaded(None, repr(event.worker.error)))
        elif event.worker.group == "components-action":
            event.stop()
            self.post_message(ActionDone("", f"{self.busy} failed: {event.worker.error!r}"))

    # -- the list --------------------------------------------------------------------------
    def _rebuild(self) -> None:
        assert self.view is not None
        options = self.query_one(OptionList)
        keep = options.highlighted_option.id if options.highlighted_option is not None else None
        items: list[Option] = []
        for entry in self.view.components:
            items.append(Option(component_label(entry), id=_option_id(entry.name)))
            items.extend(Option(version_label(cv, entry.active), id=_option_id(entry.name, cv.version))
                         for cv in entry.versions)
        options.clear_options()
        options.add_options(items)
        if keep is None and self.view.components:
            first = self.view.components[0]
            keep = _option_id(first.name, first.active or first.versions[0].version)
        self._highlight(keep)

    def _highlight(self, option_id: str | None) -> None:
        options = self.query_one(OptionList)
        try:
            options.highlighted = options.get_option_index(option_id) if option_id else 0
        except OptionDoesNotExist:  # the version left the list (never, versions are kept): start at the top
            options.highlighted = 0

    def selected(self) -> ComponentVersion | None:
        """The highlighted version (a component's own line stands for its active version)."""
        option = self.query_one(OptionList).highlighted_option
        if option is None or self.view is None or option.id is None:
            return None
        kind, _, spec = option.id.partition(":")
        if kind == "c":
            entry = self.view.entry(spec)
            return self.view.active(spec) or (entry.versions[0] if entry is not None else None)
        name, _, version = spec.rpartition("@")
        return self.view.find(name, version)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self.show_selected()

    def show_selected(self) -> None:
        view, cv = self.view, self.selected()
        shown = (view, cv, self.against_active, id(self.rows), self.loaded)
        if view is None or shown == self._shown:
            return
        self._shown = shown
        audit = version_audit(self.rows, view, cv) if self.rows and cv is not None else None
        self.query_one("#audit", Static).update(audit_text(view, cv, self.rows, audit, self.loaded))
        diff = self.query_one(DiffView)
        if cv is None:
            diff.set_texts("", "", "select a version")
            return
        base = view.active(cv.component) if self.against_active else view.parent(cv)
        if base is None:
            old, caption = "", f"{cv.spec} (the seed's version)" if not self.against_active else \
                f"{cv.spec} (no active version)"
        else:
            old = base.text
            caption = f"{base.spec}{' (active)' if self.against_active else ''} -> {cv.spec}"
        diff.set_texts(old, cv.text, caption + changed_note(old, cv.text))

    # -- actions ---------------------------------------------------------------------------
    def action_toggle_against(self) -> None:
        self.against_active = not self.against_active
        self.show_selected()
        self.notify("Diff against the active version" if self.against_active else "Diff against the parent version",
                    timeout=2)

    def action_goto_active(self) -> None:
        cv = self.selected()
        active = self.view.active(cv.component) if cv is not None and self.view is not None else None
        if active is None:
            self.notify("No active version to select", severity="warning")
            return
        self._highlight(_option_id(active.component, active.version))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Restore and edit are not offered in a read-only view, and shown disabled once the run ended."""
        if action in ("restore", "edit"):
            app = self.app
            if not app.can_control:
                return False
            frame = app.sampler.frame
            if frame is not None and frame.finished:
                return None
        return True

    def action_diff_mode(self) -> None:
        self.query_one(DiffView).toggle_mode()

    def _refused(self, what: str) -> bool:
        """True (after a notice) when this view cannot act: read-only, ended, or busy."""
        app = self.app
        frame = app.sampler.frame
        if not app.can_control:
            self.notify(f"This view is read-only: it cannot {what}. A stored run is restored with `evotui restore "
                        "RUN NAME@X.Y.Z`; a hot-swap needs a live run (its TUI, or attach with its control socket).",
                        severity="warning", timeout=10)
            return True
        if frame is not None and frame.finished:
            self.notify(f"The run has ended ({frame.finished}): it cannot {what} here. Restore a stored run with "
                        "`evotui restore RUN NAME@X.Y.Z`.", severity="warning", timeout=10)
            return True
        if self.busy:
            self.notify(f"Wait: {self.busy} is under way", severity="warning")
            return True
        return False

    def _start(self, label: str, work: Awaitable[Any], done: Callable[[Any], str]) -> None:
        self.busy = label
        self.notify(f"{label[0].upper()}{label[1:]}…", timeout=3)
        self.run_worker(self._act(work, done), name="components-action", group="components-action",
                        exit_on_error=False, description=label)

    async def _act(self, work: Awaitable[Any], done: Callable[[Any], str]) -> None:
        try:
            result = await work
        except BackendError as exc:
            self.post_message(ActionDone("", str(exc)))
            return
        self.post_message(ActionDone(done(result)))

    @on(ActionDone)
    def _action_done(self, message: ActionDone) -> None:
        self.busy = ""
        if message.error:
            self.notify(message.error, severity="error", timeout=10)
        else:
            self.notify(message.text, timeout=8)
        self.app.sampler.tick()

    def action_restore(self) -> None:
        cv = self.selected()
        if cv is None or self.view is None:
            self.notify("Select a version first", severity="warning")
            return
        if self._refused("restore a version"):
            return
        if cv.artifact_id == self.view.active_id:
            self.notify(f"{cv.spec} is in the active artifact {cv.artifact_id} already", severity="warning")
            return

        def answer(reason: str | None) -> None:
            if reason is None:
                return
            self._start(f"restore of {cv.spec}", self.app.backend.restore(cv.artifact_id, reason or
                                                                          f"restore {cv.spec} from the TUI"),
                        lambda r: f"Restored {cv.spec}: {r['artifact_id']} is the active best again (was "
                                  f"{r.get('previous_id') or '-'}); pool version {r['pool_version']}")

        self.app.push_screen(ReasonScreen(
            f"Restore {cv.spec}? Artifact {cv.artifact_id} becomes the run's active best again (through the "
            "ledger, as `evotui restore` does); every component takes that artifact's version."), answer)

    def action_edit(self) -> None:
        cv = self.selected()
        if cv is None or self.view is None:
            self.notify("Select a component first", severity="warning")
            return
        entry = self.view.entry(cv.component)
        if self._refused("hot-swap a component"):
            return
        if entry is not None and not entry.evolvable:
            self.notify(f"component {cv.component!r} is frozen (evolvable = false in the task): it cannot be edited",
                        severity="error", timeout=8)
            return
        active = self.view.active(cv.component)
        if active is None:
            self.notify("The run has no active artifact yet; wait for the seed's evaluation", severity="warning")
            return

        def confirmed(edit: tuple[str, str], yes: bool | None) -> None:
            if yes:
                name, (text, reason) = active.component, edit
                self._start(f"hot-swap of {name}", self.app.backend.edit_component(name, text, reason),
                            lambda r: f"Hot-swapped {r['component']}@{r['version']}: {r['artifact_id']} is active "
                                      f"(val {r['val_mean']:.3f}); pool version {r['pool_version']}")

        def edited(edit: tuple[str, str] | None) -> None:
            if edit is not None:
                self.app.push_screen(ConfirmScreen(
                    f"Hot-swap {active.component} of the live run? The edited artifact is validated on the "
                    "validation set, committed as a new version and made active."),
                    lambda yes: confirmed(edit, yes))

        self.app.push_screen(EditComponentScreen(active, entry.frozen_regions if entry else 0), edited)


class EditComponentScreen(ModalScreen[tuple[str, str] | None]):
    """The active text of one component in a TextArea, and an optional reason; dismissed with
    (text, reason) on submit, None on cancel."""

    BINDINGS = EDIT_BINDINGS

    def __init__(self, active: ComponentVersion, frozen_regions: int = 0) -> None:
        super().__init__()
        self.active = active
        self.frozen_regions = frozen_regions

    def compose(self) -> ComposeResult:
        keep = f"; keep its {self.frozen_regions} frozen region{'s' if self.frozen_regions != 1 else ''} verbatim" \
            if self.frozen_regions else ""
        with Vertical(classes="dialog", id="edit-dialog"):
            yield Static(f"Edit {self.active.component} (active: {self.active.spec}, artifact "
                         f"{self.active.artifact_id}){keep}", classes="question")
            yield TextArea(self.active.text, id="edit-text", soft_wrap=True)
            yield Input(placeholder="reason (optional); enter submits", id="edit-reason")
            yield Static("[b]ctrl+s[/] submit · [b]tab[/] to the reason · [b]esc[/] cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_submit(self) -> None:
        self.dismiss((self.query_one(TextArea).text, self.query_one(Input).value.strip()))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def action_cancel(self) -> None:
        self.dismiss(None)
