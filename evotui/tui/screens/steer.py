"""The steering dialog (key g): guidance for the proposer, pin / ban / re-evaluate a candidate,
branch a new run from it. What is in force is shown on top and refreshed after every act.

Acts go where the run lives: in this process, evotui.control.steer (the control socket's own
path, so the act is committed before the dialog says so); attached, the driver's control socket
(`steer`, by "tui" either way). Refusals are error notices; a read-only view refuses every act.
The candidate field starts on the artifact selected on the screen the dialog was opened from
(lineage: the highlighted artifact; review: the selected proposal's parent).
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Static

from engine.steering import SteerError
from evotui.tui.backend import BackendError
from evotui.tui.screens.steer_branch import BranchError, start_branch

STEER_DIALOG_BINDINGS = [
    Binding("escape", "close", "Close", id="steer.close", tooltip="Close the steering dialog"),
]
CANDIDATE_ACTS = {"pin": "Pin", "unpin": "Unpin", "ban": "Ban", "unban": "Unban", "reeval": "Held-out",
                  "branch": "Branch"}


def candidate_of(screen: Screen | None, backend) -> str:
    """The artifact the user is looking at on `screen` ("" if none): lineage's highlighted
    artifact, or the parent of the review queue's selected proposal."""
    try:
        if callable(picked := getattr(screen, "selected", None)):
            return str(getattr(picked(), "artifact_id", None) or "")
        if callable(item_of := getattr(screen, "selected_id", None)) and (item_id := item_of()):
            return next((str(p.parent_id) for p in backend.pending() if p.item_id == item_id), "")
    except Exception:  # noqa: BLE001 - a screen still without a selection: the field starts empty
        return ""
    return ""


def describe_state(state: dict[str, Any]) -> str:
    lines = []
    for g in state.get("guidance", []):
        left = "until withdrawn" if g["left"] is None else f"{g['left']} left"
        lines.append(f"guidance #{g['act_id']} ({left}): {g['text'][:120]}")
    pin = state.get("pin")
    if pin:
        left = "until unpinned" if pin["left"] is None else f"{pin['left']} left"
        lines.append(f"pinned parent {pin['artifact_id']} ({left})")
    if state.get("bans"):
        lines.append("banned: " + ", ".join(state["bans"]))
    done = [a for a in state.get("history", []) if a["act"] == "reevaluated"][-2:]
    lines += [a["line"] for a in done]
    return "\n".join(lines) or "nothing in force: the strategy picks parents, the proposer has no guidance"


class SteerScreen(ModalScreen[None]):
    BINDINGS = STEER_DIALOG_BINDINGS
    DEFAULT_CSS = """
    SteerScreen { align: center middle; }
    #steer-dialog { width: 96; max-width: 98%; height: auto; max-height: 100%; border: thick $warning;
                    background: $panel; padding: 0 1; }
    #steer-dialog .question { margin-bottom: 0; }
    #steer-state { color: $text-muted; margin-bottom: 1; }
    #steer-dialog Input { margin-bottom: 1; }
    .steer-row { height: 1; margin-bottom: 1; }
    .steer-row Button { margin-right: 2; min-width: 0; width: auto; }
    #steer-dialog .hint { color: $text-muted; }
    """

    def __init__(self, candidate: str = "") -> None:
        super().__init__()
        self.candidate = candidate

    def compose(self) -> ComposeResult:
        with Vertical(id="steer-dialog"):
            yield Static("Steer the run", classes="question")
            yield Static("", id="steer-state")
            yield Input(placeholder="guidance for the proposer; enter sends it", id="steer-text", compact=True)
            yield Input(placeholder="for N proposals (blank: until withdrawn)", id="steer-for", type="integer",
                        compact=True)
            with Horizontal(classes="steer-row"):
                yield Button("Guide", id="steer-guide", compact=True, variant="primary")
                yield Button("Withdraw all", id="steer-unguide", compact=True)
            yield Input(value=self.candidate, placeholder="candidate id (pin, ban, held-out, branch)",
                        id="steer-candidate", compact=True)
            with Horizontal(classes="steer-row"):
                for act, label in CANDIDATE_ACTS.items():
                    yield Button(label, id=f"steer-{act}", compact=True)
            yield Static("[b]enter[/] guide · [b]tab[/] next field · [b]esc[/] close · audited: "
                         "`evotui steer RUN status`", classes="hint")

    async def on_mount(self) -> None:
        self.query_one("#steer-text", Input).focus()
        await self.refresh_state()

    async def refresh_state(self) -> None:
        try:
            state = await self.app.backend.control("steering")
        except BackendError as exc:
            state, note = {}, str(exc)
        else:
            note = ""
        self.query_one("#steer-state", Static).update(note or describe_state(state or {}))

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("steer-text", "steer-for"):
            await self.act("guide")

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        await self.act(str(event.button.id).removeprefix("steer-"))

    def _count(self) -> int | None:
        raw = self.query_one("#steer-for", Input).value.strip()
        return int(raw) if raw else None

    async def act(self, act: str) -> None:
        target = self.query_one("#steer-candidate", Input).value.strip()
        if act == "branch":
            await self._branch(target)
            return
        req: dict[str, Any] = {"act": act}
        if act == "guide":
            req.update(text=self.query_one("#steer-text", Input).value, count=self._count())
        elif act == "pin":
            req.update(target=target, count=self._count())
        elif act == "reeval":
            req.update(target=target, heldout=True)
        elif act in ("ban", "unban"):
            req["target"] = target
        try:
            reply = await send(self.app, req)
        except (BackendError, SteerError) as exc:
            self.app.notify(str(exc), severity="error", timeout=8)
            return
        for line in reply["lines"]:
            self.app.notify(line, timeout=5)
        if act == "guide":
            self.query_one("#steer-text", Input).value = ""
        await self.refresh_state()

    async def _branch(self, target: str) -> None:
        try:
            started = start_branch(self.app.backend, target)
        except BranchError as exc:
            self.app.notify(str(exc), severity="error", timeout=8)
            return
        self.app.notify(started, timeout=10)

    def action_close(self) -> None:
        self.dismiss(None)


async def send(app, req: dict[str, Any]) -> dict[str, Any]:
    """One act where the run lives (see the module docstring); BackendError/SteerError if refused."""
    backend = app.backend
    run = getattr(backend, "run", None)
    if run is not None and backend.can_control:
        if backend.finished:
            raise BackendError(f"the run has ended ({backend.finished}): steering acts on a live run; "
                               f"`evotui resume {run.ctx.run_id}` and steer again")
        from evotui.control import steer

        return await steer(run, req, "tui")
    return await app.backend.control("steer", by="tui", **req)
