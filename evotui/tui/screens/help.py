"""evotui's own F1 help and its Ctrl+C question.

HelpScreen explains the screen it was opened over: what its panels mean (the screen's HELP),
every key active there with what it does, how to steer the run and how to leave without stopping
it. InterruptScreen is what Ctrl+C asks: drain, stop, leave (an attached view) or cancel.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

from evotui.tui.keymap import HELP_SCREEN_BINDINGS, INTERRUPT_BINDINGS

STEERING = """\
## Steering the run
**Space** pauses and resumes (running requests finish, nothing new starts). **d** drains: nothing
new is admitted and the run ends when in-flight work is done. **p** cycles the staleness policy
full -> guarded -> reflective. **R** / **C** turn review before evaluation / before commit on and
off; **x** speculative evaluation. **w** selects a stage, **+** / **-** change its workers. On the
review screen (**2**) approve, reject, edit or skip each proposal, with its scores against the
parent and the best and the proposer's rationale above the diff.
{dialog}
From another terminal (another SSH session, a script), `evotui attach` opens this view on a run;
where the run serves its control socket the same keys steer it there, and `evotui steer RUN ...`
does the same acts from the shell. `evotui branch` starts a new run from any artifact of a run.
"""

LEAVING = """\
## Leaving
In a view opened with `evotui attach`, **q** leaves and the run goes on. A run this TUI started
lives in this process: **q** stops it (it stays resumable with `evotui resume`). To leave a run
running, start it with `--no-ui` (or under tmux/screen) and watch it with `evotui attach`.
**Ctrl+C** asks whether to drain, stop or cancel; it never stops the run without asking.
"""


def steering_dialog(screen: Screen) -> str:
    """The steering dialog's paragraph, its key and words read from its binding (if this build
    has one, and this view can steer)."""
    found = [(key, a.binding) for key, a in screen.active_bindings.items() if "steer" in (a.binding.id or "")]
    if not found:
        return ("The steering dialog (free-text guidance for the next proposals, pin or ban a "
                "candidate, re-evaluate it, branch from it) is not offered in this view.")
    key, b = found[0]
    return (f"**{screen.app.get_key_display(b)}** opens the steering dialog ({b.tooltip or b.description}): "
            "guidance for the proposer (for the next N proposals or until withdrawn), pin a candidate as "
            "the parent or ban it, re-evaluate it on more examples or the held-out set, branch a new run "
            "from it. What is in force is listed on top; every act is audited and survives a resume. "
            "On the lineage and review screens the candidate field starts on the selected artifact.")


def keys_table(screen: Screen) -> str:
    """Every binding active on `screen` (app-level ones included) with its description."""
    rows = []
    seen: set[str] = set()
    for key, active in screen.active_bindings.items():
        b = active.binding
        if b.system or not b.description or (key, b.action) in seen:
            continue
        seen.add((key, b.action))
        what = b.tooltip or b.description
        state = "" if active.enabled else " (not now)"
        rows.append(f"| `{screen.app.get_key_display(b)}` | {what}{state} |")
    return "## Keys here\n| key | does |\n|---|---|\n" + "\n".join(rows) + "\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS = HELP_SCREEN_BINDINGS

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        about = getattr(self.under, "HELP", None) or ""
        steering = STEERING.format(dialog=steering_dialog(self.under))
        text = "\n".join(part for part in (about, keys_table(self.under), steering, LEAVING) if part)
        with Vertical(classes="dialog", id="help-dialog"):
            with VerticalScroll(id="help-scroll"):
                yield Markdown(text, id="help-text")
            yield Static("[b]esc[/] / [b]f1[/] close · arrows / PgUp / PgDn scroll", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)


class InterruptScreen(ModalScreen[str | None]):
    """Answers "drain", "stop", "leave" or None (cancel); offers only what the view can do."""

    BINDINGS = INTERRUPT_BINDINGS

    def __init__(self, can_control: bool, owns_run: bool, running: bool) -> None:
        super().__init__()
        self.can_control, self.owns_run, self.running = can_control, owns_run, running

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "answer" and parameters:
            return parameters[0] is None or parameters[0] in self.offered()
        return True

    def offered(self) -> list[str]:
        out = ["drain", "stop"] if self.can_control and self.running else []
        return out + ([] if self.owns_run and self.running else ["leave"])

    def compose(self) -> ComposeResult:
        words = {"drain": "[b]d[/] drain (finish in-flight work, then end)",
                 "stop": "[b]s[/] stop the run" + (" and quit (resumable)" if self.owns_run else " (resumable)"),
                 "leave": "[b]l[/] leave this view" + ("; the run goes on" if self.running and not self.owns_run else "")}
        with Vertical(classes="dialog", id="interrupt-dialog"):
            yield Static("Ctrl+C: what now?", classes="question")
            for choice in self.offered():
                yield Static(words[choice])
            yield Static("[b]esc[/] / [b]c[/] cancel: carry on", classes="hint")

    def action_answer(self, choice: str | None) -> None:
        self.dismiss(choice)
