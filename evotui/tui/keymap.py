"""Every user action as a Binding with an id (remappable through [keymap] in the UI config),
a description (footer, F1 help) and a tooltip. Keys are ones every terminal sends over SSH:
letters, digits, space, enter, escape, F1.
"""

from __future__ import annotations

from textual.binding import Binding

APP_BINDINGS = [
    Binding("space", "toggle_pause", "Pause", id="pause", tooltip="Pause or resume the pipeline"),
    Binding("d", "drain", "Drain", id="drain", tooltip="Admit nothing more; finish in-flight work (asks first)"),
    Binding("q", "quit", "Quit", id="quit", tooltip="Quit; a live run is stopped and stays resumable (asks first)"),
    Binding("1", "show('dashboard')", "Dash", id="screen.dashboard", tooltip="Dashboard"),
    Binding("2", "show('review')", "Review", id="screen.review", tooltip="Patch review queue"),
    Binding("3", "show('lineage')", "Lineage", id="screen.lineage", tooltip="Artifact tree"),
    Binding("4", "show_islands", "Islands", id="screen.islands",
            tooltip="Islands: sizes, bests, temperatures, MAP-Elites grids, migrations (island strategies only)"),
    Binding("5", "show('analysis')", "Analysis", id="screen.analysis", show=False,
            tooltip="Analysis: best-so-far timeline, recycled lines, edit types (evotui analyze's figures)"),
    Binding("6", "show_components", "Components", id="screen.components", show=False,
            tooltip="Components: versions, diffs, audit records, restore and hot-swap (named components only)"),
    Binding("w", "next_stage", "Stage", id="stage.next", tooltip="Select the next stage for worker changes"),
    Binding("plus,equals_sign", "workers(1)", "Wk+", id="workers.more", key_display="+",
            tooltip="One more worker on the selected stage"),
    Binding("minus", "workers(-1)", "Wk-", id="workers.less", key_display="-",
            tooltip="One worker fewer on the selected stage"),
    Binding("p", "toggle_policy", "Policy", id="policy", tooltip="Staleness policy: full -> guarded -> reflective"),
    Binding("R", "toggle_gate('evaluate')", "Gate eval", id="gate.evaluate", show=False,
            tooltip="Review proposals before evaluation on/off"),
    Binding("C", "toggle_gate('update')", "Gate commit", id="gate.commit", show=False,
            tooltip="Review proposals before commit on/off"),
    Binding("x", "toggle_speculation", "Speculation", id="speculation", show=False,
            tooltip="Speculative evaluation on/off"),
    Binding("g", "steer", "Steer", id="steer", show=False,
            tooltip="Steer: guidance for the proposer; pin, ban, re-evaluate or branch from a candidate"),
    Binding("f1", "toggle_help", "Help", id="help",
            tooltip="evotui help: this screen's panels, every key, how to steer and how to leave"),
    Binding("ctrl+c", "interrupt", "Interrupt", id="interrupt", show=False,
            tooltip="Ask whether to drain the run, stop it, leave the view, or carry on"),
]

DASHBOARD_BINDINGS = [
    Binding("right_square_bracket", "switch_panel(1)", "Panel", id="dash.next_panel", key_display="]",
            tooltip="Next dashboard panel (tab)"),
    Binding("left_square_bracket", "switch_panel(-1)", "Panel", id="dash.previous_panel", key_display="[",
            show=False, tooltip="Previous dashboard panel (tab)"),
    Binding("end", "follow_log", "Follow log", id="log.follow", show=False,
            tooltip="Scroll the event log to its end and follow new lines"),
]

REVIEW_BINDINGS = [
    Binding("a", "approve", "Approve", id="review.approve", tooltip="Approve the selected proposal"),
    Binding("r", "reject", "Reject", id="review.reject", tooltip="Reject, with an optional reason"),
    Binding("e", "edit", "Edit", id="review.edit", tooltip="Edit the proposal in $EDITOR, then approve it"),
    Binding("s", "skip", "Skip", id="review.skip", tooltip="Send to the back of the queue"),
    Binding("A", "approve_all", "Approve all", id="review.approve_all", tooltip="Approve everything waiting"),
    Binding("m", "diff_mode", "Unified/split", id="diff.mode", tooltip="Unified or side-by-side diff"),
]

LINEAGE_BINDINGS = [
    Binding("enter", "open_diff", "Diff", id="lineage.diff", tooltip="Diff the artifact against its parent"),
    Binding("y", "copy_id", "Copy id", id="lineage.copy_id", tooltip="Copy the artifact id (OSC 52)"),
    Binding("Y", "copy_text", "Copy text", id="lineage.copy_text", tooltip="Copy the artifact text (OSC 52)"),
    Binding("b", "goto_best", "Best", id="lineage.best", tooltip="Select the best artifact"),
    Binding("m", "diff_mode", "Unified/split", id="lineage.mode", tooltip="Unified or side-by-side diff"),
    Binding("o", "toggle_notes", "Notes", id="lineage.notes",
            tooltip="Show or hide the strategy's plan, summary and guidance beside the diff"),
]

ISLANDS_BINDINGS = [
    Binding("right_square_bracket", "island(1)", "Island", id="islands.next", key_display="]",
            tooltip="Show the next island's grid"),
    Binding("left_square_bracket", "island(-1)", "Island", id="islands.previous", key_display="[", show=False,
            tooltip="Show the previous island's grid"),
]

ANALYSIS_BINDINGS = [
    Binding("r", "reanalyse", "Re-analyse", id="analysis.refresh", tooltip="Analyse the run's database again"),
]

COMPONENTS_BINDINGS = [
    Binding("r", "restore", "Restore", id="components.restore",
            tooltip="Restore the selected version: its artifact becomes the active best again (asks first)"),
    Binding("e", "edit", "Edit", id="components.edit",
            tooltip="Hot-swap: edit the selected component of the live run's active artifact (asks first)"),
    Binding("v", "toggle_against", "Vs active", id="components.against",
            tooltip="Diff the selected version against its parent version or against the active version"),
    Binding("a", "goto_active", "Active", id="components.active", show=False,
            tooltip="Select the active version of the selected component"),
    Binding("m", "diff_mode", "Unified/split", id="components.mode", show=False,
            tooltip="Unified or side-by-side diff"),
]

EDIT_BINDINGS = [
    Binding("ctrl+s", "submit", "Submit", id="edit.submit",
            tooltip="Submit the edited component (asks to confirm; enter in the reason field does the same)"),
    Binding("escape", "cancel", "Cancel", id="edit.cancel", tooltip="Close without changing anything"),
]

DIFF_NAV_BINDINGS = [
    Binding("n", "next_change", "Next chg", id="diff.next", tooltip="Scroll the diff to the next change"),
    Binding("N", "previous_change", "Prev chg", id="diff.previous", tooltip="Scroll the diff to the previous change"),
    Binding("f", "toggle_fold", "Fold/full", id="diff.fold",
            tooltip="Only the changes with a few lines of context, or the full file"),
]

DIFF_BINDINGS = [
    Binding("m", "diff_mode", "Unified/split", id="diffscreen.mode", tooltip="Unified or side-by-side diff"),
    Binding("escape", "close", "Back", id="diffscreen.close", tooltip="Back"),
]

HELP_SCREEN_BINDINGS = [
    Binding("escape,f1", "close", "Close", id="help.close", tooltip="Close the help"),
    Binding("q", "app.quit", "Quit", id="help.quit", tooltip="Quit, as q does everywhere (a live run: asks first)"),
]

INTERRUPT_BINDINGS = [
    Binding("d", "answer('drain')", "Drain", id="interrupt.drain", tooltip="Drain: finish in-flight work, then end"),
    Binding("s", "answer('stop')", "Stop", id="interrupt.stop", tooltip="Stop the run (resumable)"),
    Binding("l", "answer('leave')", "Leave", id="interrupt.leave", tooltip="Leave this view"),
    Binding("escape,c,ctrl+c", "answer(None)", "Cancel", id="interrupt.cancel", tooltip="Carry on"),
]

CONFIRM_BINDINGS = [
    Binding("y", "answer(True)", "Yes", id="confirm.yes"),
    Binding("n,escape", "answer(False)", "No", id="confirm.no"),
]


RESERVED = {"ctrl+p": "the command palette", "ctrl+q": "quit (Textual)", "ctrl+c": "copy a selection / interrupt",
            "tab": "focus next", "shift+tab": "focus previous"}
"""Keys Textual itself binds on every screen."""

SCOPES = {
    "dashboard": APP_BINDINGS + DASHBOARD_BINDINGS,
    "review": APP_BINDINGS + REVIEW_BINDINGS + DIFF_NAV_BINDINGS,
    "lineage": APP_BINDINGS + LINEAGE_BINDINGS,
    "islands": APP_BINDINGS + ISLANDS_BINDINGS,
    "analysis": APP_BINDINGS + ANALYSIS_BINDINGS,
    "components": APP_BINDINGS + COMPONENTS_BINDINGS + DIFF_NAV_BINDINGS,
    "diff": APP_BINDINGS + DIFF_BINDINGS + DIFF_NAV_BINDINGS,
    "confirm": CONFIRM_BINDINGS,
    "edit": EDIT_BINDINGS,
    "help": HELP_SCREEN_BINDINGS,
    "interrupt": INTERRUPT_BINDINGS,
}
"""Bindings active together on each screen: a key may mean one thing per screen."""


def _keys(spec: str) -> list[str]:
    return [k.strip() for k in spec.split(",") if k.strip()]


def keymap_clashes(keymap: dict[str, str]) -> list[str]:
    """Each key the keymap gives a binding that another binding on the same screen (or Textual
    itself) already uses, named: "'q' for pause clashes with quit (q) on the dashboard screen"."""
    problems: list[str] = []
    clashes: dict[str, list[str]] = {}
    for screen, bindings in SCOPES.items():
        keys = {b.id or b.action: _keys(keymap.get(b.id or "", b.key)) for b in bindings}
        owners: dict[str, list[str]] = {}
        for name, ks in keys.items():
            for key in ks:
                owners.setdefault(key, []).append(name)
        for name in keys:
            if name not in keymap:
                continue
            for key in _keys(keymap[name]):
                if key in RESERVED:
                    problems.append(f"'{key}' for {name} clashes with {RESERVED[key]}")
                for other in owners[key]:
                    if other != name:
                        clashes.setdefault(f"'{key}' for {name} clashes with {other} ({','.join(keys[other])})",
                                           []).append(screen)
    for text, screens in clashes.items():
        where = ", ".join(screens[:-1]) + " and " + screens[-1] if len(screens) > 1 else screens[0]
        problems.append(f"{text} on the {where} screen{'s' if len(screens) > 1 else ''}")
    return list(dict.fromkeys(problems))


def binding_ids() -> list[str]:
    groups = (APP_BINDINGS, DASHBOARD_BINDINGS, REVIEW_BINDINGS, LINEAGE_BINDINGS, ISLANDS_BINDINGS,
              ANALYSIS_BINDINGS, COMPONENTS_BINDINGS, EDIT_BINDINGS, DIFF_BINDINGS, DIFF_NAV_BINDINGS, CONFIRM_BINDINGS,
              HELP_SCREEN_BINDINGS, INTERRUPT_BINDINGS)
    return [b.id for group in groups for b in group if b.id]
