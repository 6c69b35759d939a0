"""The frame every screen shares (status line, footer, too-small notice) and the small modals."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static

from evotui.tui.backend import Frame
from evotui.tui.keymap import CONFIRM_BINDINGS
from evotui.tui.widgets.panels import StatusBar

MIN_W, MIN_H = 60, 16


class EvoScreen(Screen):
    """Subclasses yield their widgets from body() and refresh them in apply()."""

    status_bar: StatusBar | None = None
    """Kept, not queried: apply() runs on every sampler tick."""

    def compose(self) -> ComposeResult:
        self.status_bar = StatusBar(id="status")
        yield self.status_bar
        with Vertical(id="body"):
            yield from self.body()
        yield Static(id="too-small")
        yield Footer(compact=True)

    def body(self) -> ComposeResult:
        yield from ()

    ready = False
    _offered_control: bool | None = None

    def on_mount(self) -> None:
        self.ready = True
        self.check_size()

    def on_resize(self) -> None:
        self.check_size()

    def check_size(self) -> None:
        w, h = self.app.size
        small = w < MIN_W or h < MIN_H
        self.set_class(small, "-too-small")
        if small:
            self.query_one("#too-small", Static).update(
                f"Terminal too small: {w}x{h}. evotui needs at least {MIN_W}x{MIN_H} (80x24 recommended). "
                "The run continues; enlarge the window or press q to quit.")

    def apply(self, frame: Frame, app) -> bool:
        """Show `frame`; False if the screen could not (the sampler then offers it again)."""
        bar = self.status_bar
        if not self.ready or bar is None or not bar.is_attached:
            return False  # not composed yet, or being torn down (e.g. while the editor suspends the app)
        bar.show(frame, app.selected_stage, app.size.width)
        if frame.can_control != self._offered_control:
            self._offered_control = frame.can_control
            app.refresh_bindings()  # the footer offers only what the view can do
        self.refresh_body(frame, app)
        return True

    def refresh_body(self, frame: Frame, app) -> None:
        pass


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = CONFIRM_BINDINGS

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="question")
            yield Static("[b]y[/] yes · [b]n[/] / [b]esc[/] no", classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ReasonScreen(ModalScreen[str | None]):
    """Asks for an optional reason; enter submits (blank is fine), escape cancels."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="question")
            yield Input(placeholder="reason (optional), enter to confirm", id="reason")
            yield Static("[b]enter[/] confirm · [b]esc[/] cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
