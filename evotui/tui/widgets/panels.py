"""Dashboard panels. Each renders one Frame into markup that uses theme variables only; states
and warnings are spelled out in words or symbols as well as colour.

Panels are quiet: a panel builds its markup (cheap) and hands it to the widget only when it
differs from what it last rendered, because every update() repaints the panel's whole region on
the terminal, which over SSH is the TUI's main cost. A change that keeps every line's length asks
for a repaint without a layout pass.
"""

from __future__ import annotations

from typing import Any, Mapping

from textual.markup import escape
from textual.widgets import Static

from evotui.tui.backend import Frame

def bar(fraction: float, width: int = 12) -> str:
    fraction = max(0.0, min(1.0, fraction))
    full = int(round(fraction * width))
    return "█" * full + "░" * (width - full)


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _shape(markup: str) -> tuple[int, ...]:
    """Line lengths of the markup: equal shapes wrap alike, so an update needs no layout pass."""
    return tuple(len(line) for line in markup.split("\n"))


class QuietStatic(Static):
    """A Static that ignores an update with the markup it already shows."""

    renders = 0
    """How many times the content really changed (tests assert on it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown: str | None = None

    def _shape(self, markup: str) -> tuple[int, ...]:
        """What decides this widget's size: nothing when the layout sets both sides (the status
        line); the line count for `text-wrap: nowrap` in a width the layout sets (every dashboard
        panel); else every line's length, which decides the wrapping. So a number that grows a
        digit repaints without a layout pass (~35 ms at 160x48 in the profile)."""
        width, height = self.styles.width, self.styles.height
        fixed_width = width is None or not width.is_auto
        if fixed_width and height is not None and not height.is_auto:
            return ()
        if self.styles.text_wrap == "nowrap" and fixed_width:
            return (markup.count("\n"),)
        return _shape(markup)

    def show_markup(self, markup: str) -> bool:
        """Update if `markup` differs from the last one; returns whether it did."""
        if markup == self._shown:
            return False
        relayout = self._shown is None or self._shape(markup) != self._shape(self._shown)
        self._shown = markup
        self.renders += 1
        self.update(markup, layout=relayout)
        return True


class Panel(QuietStatic):
    """A bordered block of markup; subclasses implement text(frame)."""

    TITLE = ""

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def show(self, frame: Frame, **ctx) -> None:
        self.show_markup(self.text(frame, **ctx))

    def text(self, frame: Frame, **ctx) -> str:
        raise NotImplementedError


class QueuePanel(Panel):
    TITLE = "Queues"

    def text(self, frame: Frame, selected: str = "", **ctx) -> str:
        snap = frame.snap
        if not snap.stages:
            return "[$text-muted]no live queue data (read-only attach)[/]"
        lines = ["[b] stage   depth  busy/wk  /s[/]"]
        for st in snap.stages:
            mark = "▶" if st.name == selected else " "
            full = st.blocked > 0 or st.depth >= st.capacity
            bp = " [$warning b]BP[/]" if full else ""
            lines.append(f"{mark}{st.name:<8}{st.depth:>3}/{st.capacity:<3}{st.busy:>3}/{st.workers:<3}"
                         f"{st.rate_per_s:>5.1f}{bp}")
        if slots := slots_line(frame.gpu):
            lines.append(slots)
        return "\n".join(lines)


def slots_line(gpu: Mapping[str, Any] | None) -> str:
    """`gpu slots 3/4 busy (0:2 1:1)`, or "" when evaluations lease no GPU slots."""
    if not gpu or "slots" not in gpu:
        return ""
    per = " ".join(f"{d}:{n}" for d, n in (gpu.get("by_gpu") or {}).items())
    return f"gpu slots {gpu['busy']}/{gpu['slots']} busy" + (f" ({per})" if per else "")


class GapsPanel(Panel):
    TITLE = "Version gaps"

    def text(self, frame: Frame, **ctx) -> str:
        snap = frame.snap
        guard = f" max gap {snap.max_gap}" if snap.policy in ("guarded", "reflective") else ""
        lines = [f"pool [b]v{snap.pool_version}[/] · {snap.pool_size} artifacts · policy [b]{snap.policy}[/]{guard}"]
        hist = dict(snap.gap_histogram)
        if hist:  # the histogram's plot is on the Queues & gaps tab
            lines.append("items by gap  " + "  ".join(f"{gap}: {n}" for gap, n in sorted(hist.items())))
        # mode chain counts its events beside the staleness decisions; they get their own line.
        chain_events = {k: v for k, v in snap.staleness.items() if k.startswith("chain_")}
        decisions = {k: v for k, v in snap.staleness.items() if k not in chain_events}
        counts = " ".join(f"{k} {v}" for k, v in sorted(decisions.items())) or "no checks yet"
        lines.append(f"decisions: {escape(counts)} · discarded {snap.discarded_stale}")
        if snap.chains_max:  # set in mode chain only (engine/run/snapshot.py reads the mode table)
            lines.extend(chain_lines(snap, chain_events))
        lines.extend(f"[$text-muted]{escape(d)}[/]" for d in frame.decisions[-3:])
        return "\n".join(lines)


def chain_lines(snap, events: dict[str, int]) -> list[str]:
    """mode chain: how many chains run against the count now, and what their steps met."""
    lo, hi = snap.chains_min, snap.chains_max
    dial = f"adapts {lo}-{hi}" if lo < hi else "fixed"
    running = f"[b]{snap.chains_running}[/] running · " if snap.stages else ""  # live runs only
    lines = [f"chains {running}count [b]{snap.chain_count}[/] ({dial})"]
    if events:
        listed = " ".join(f"{k.removeprefix('chain_').replace('_', '-')} {v}" for k, v in sorted(events.items()))
        lines.append(f"[$text-muted]chain events: {escape(listed)}[/]")
    return lines


class LLMPanel(Panel):
    """Endpoints (calls, errors, latency, tokens), then what a proposal costs: the full panel (the
    LLM tab) by stage, a strategy's agents included; the dashboard's small one in total."""

    TITLE = "LLM"

    def __init__(self, *args, by_stage: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.by_stage = by_stage

    def text(self, frame: Frame, **ctx) -> str:
        # Latencies in the plots' unit: simulated seconds in a simulated run (wall x time scale).
        scale = frame.time_scale if frame.snap.simulated else 1.0
        unit = "sim s" if frame.snap.simulated else "s"
        lines = [f"[b]endpoint  in-fl calls  err/retry  p50/p95 {unit}[/]"]
        for s in frame.llm:
            err = f"[$error b]{s.errors} ERR[/]" if s.errors else "0"
            lines.append(f"{escape(s.endpoint):<10}{s.in_flight:>5}{s.calls:>6}  {err}/{s.retries:<4} "
                         f"{_latency(s.p50_s, scale)}/{_latency(s.p95_s, scale)}")
            lines.append(f"[$text-muted]  tokens in {s.tokens_in:,} · out {s.tokens_out:,}[/]")
        lines.extend(per_proposal_lines(frame.snap, self.by_stage))
        return "\n".join(lines)


def _latency(seconds: float | None, scale: float) -> str:
    if seconds is None:
        return "-"
    v = seconds * scale
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def per_proposal_lines(snap, by_stage: bool) -> list[str]:
    """LLM calls and tokens per proposal the LLM returned, per stage or in total; nothing before
    the first proposal or from a driver too old to send the figures."""
    calls, tokens, made = snap.calls_by_stage, snap.tokens_by_stage, snap.proposals
    if not calls or not made:
        return []
    total = f"{sum(calls.values()) / made:.2f} calls · {sum(tokens.values()) / made:,.0f} tokens"
    if not by_stage:
        return [f"per proposal {total}"]
    rows = [f"[b]per proposal  calls   tokens[/]  ({made} proposals)"]
    rows += [f"{escape(stage):<12}{n / made:>7.2f}{tokens.get(stage, 0) / made:>9,.0f}" for stage, n in calls.items()]
    rows.append(f"[$text-muted]all stages: {total}[/]")
    return rows


class BudgetPanel(Panel):
    TITLE = "Budget"

    def text(self, frame: Frame, **ctx) -> str:
        snap = frame.snap
        lines = []
        for key, limit in snap.budget_limits.items():
            if limit is None:
                continue
            spent = float(snap.budget_spent.get(key, 0.0))
            left = max(0.0, limit - spent)
            lines.append(f"{key:<12} [$primary]{bar(spent / limit if limit else 1.0)}[/] {spent:g}/{limit:g} · left {left:g}")
        if not lines:
            lines.append("no limits set")
        lines.append(f"reserved by {snap.in_flight_items} in-flight items")
        if snap.budget_exhausted:
            lines.append(f"[$warning b]EXHAUSTED[/]: {escape(snap.budget_exhausted)}")
        return "\n".join(lines)


def budget_line(snap) -> str:
    for key, limit in snap.budget_limits.items():
        if limit:
            return f"{key} {float(snap.budget_spent.get(key, 0)):g}/{limit:g}"
    return "no budget limit"


class ScoresPanel(Panel):
    """Best score, rates and acceptance in figures; the plots are on the Scores tab."""

    TITLE = "Scores"

    def text(self, frame: Frame, **ctx) -> str:
        snap = frame.snap
        acc = frame.acceptance
        rate_basis = "sim-min" if snap.simulated else "min"
        return (
            f"best [b]{fmt(snap.best_score)}[/] ({escape(snap.best_id or '-')}) · seed {fmt(snap.seed_score)}\n"
            f"{frame.proposals_per_min:.2f} prop/{rate_basis} · accept {fmt(acc and acc * 100, '.0f')}%\n"
            f"{snap.accepted} acc · {snap.rejected} rej · {snap.failed} fail · {snap.discarded_stale} stale\n"
            f"[$text-muted]v{snap.pool_version} · {budget_line(snap)}[/]"
            + (f"\n[$text-muted]rates leave out {frame.paused_s:,.0f} s paused[/]" if frame.paused_s >= 1 else ""))


class StatusBar(QuietStatic):
    """One line on every screen: run state (in words), simulated banner, source, pending reviews."""

    _last: tuple[Frame | None, str] | None = None

    def on_resize(self, event) -> None:
        """The short or long form follows the new width at once, not at the sampler's next
        frame (seconds away on a busy loop: the long form was cut at 80 columns till then)."""
        if self._last is not None:
            self.show(*self._last, width=self.app.size.width)

    def show(self, frame: Frame | None, selected: str = "", width: int = 160) -> None:
        self._last = (frame, selected)
        if frame is None:
            self.show_markup("[$text-muted]waiting for the run...[/]")
            return
        snap = frame.snap
        state = frame.finished.upper() if frame.finished else snap.state.upper()
        style = {"RUNNING": "$success", "PAUSED": "$warning", "DRAINING": "$warning"}.get(state, "$error")
        sim = f" [$evo-banner b]SIMULATED x{frame.time_scale:g}[/]" if snap.simulated else ""
        gates = "+".join(g for g, on in snap.review_gates.items() if on) or "off"
        ro = "" if frame.can_control else " [$error]READ-ONLY[/]"
        spec = "on" if snap.speculation else "off"
        if width < 150:  # one line below 150 columns: the same facts, shorter
            sim = f" [$evo-banner b]SIM x{frame.time_scale:g}[/]" if snap.simulated else ""
            ro = "" if frame.can_control else " [$error]RO[/]"
            self.show_markup(
                f"[{style} b]■ {state}[/]{sim}{ro} {snap.elapsed_s:,.0f}s v{snap.pool_version} "
                f"best {fmt(snap.best_score)} · spec {spec} · review {snap.review_pending} ({gates}) · "
                f"stage {selected or '-'} · {escape(snap.run_id)}")
            return
        self.show_markup(
            f"[{style} b]■ {state}[/]{sim} {escape(snap.run_id)} · {escape(frame.source)}{ro} · "
            f"{snap.elapsed_s:,.0f}s · v{snap.pool_version} · best {fmt(snap.best_score)} · spec {spec} · "
            f"review {snap.review_pending} waiting (gates {gates}) · stage {selected or '-'}")
