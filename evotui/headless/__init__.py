"""The --no-ui front end: progress lines on stderr, JSONL events, a JSON summary on stdout.

Signals: the first SIGINT/SIGTERM/SIGHUP drains (in-flight work finishes, nothing new starts), a
second one stops at once; either way the database stays consistent and `evotui resume` continues.
SIGHUP (an SSH drop, `tmux kill-session`) also silences the terminal output, which has gone.
SIGUSR1 toggles pause: no stage takes new items, running requests finish and are held.
A control socket (evotui.control) lets `evotui attach` observe and steer the run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from pathlib import Path
from typing import TextIO

from engine.context import EXIT_IO
from engine.evaluator import EXIT_EVALUATOR_LOST
from engine.events import Subscription
from engine.run.runner import EngineRun, RunResult
from engine.run.snapshot import EngineSnapshot
from evotui.control import ControlServer, socket_path
from evotui.headless.progress import PauseClock, Progress, budget_text, progress_of, rate_text

HANGUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminal:
    """Output that stops going to a terminal once it has hung up (writes would fail with EIO);
    output redirected to a file or pipe carries on."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.hung_up = False
        self.gone = False

    def usable(self, stream: TextIO) -> bool:
        return not (self.gone and stream is self.err) and not (self.hung_up and stream.isatty())

    def say(self, line: str) -> None:
        self.write(self.err, line)

    def write(self, stream: TextIO, line: str) -> None:
        if not self.usable(stream):
            return
        try:
            print(line, file=stream, flush=True)
        except OSError:  # the reader went away without a SIGHUP (a closed pipe, a dead tty)
            if stream is self.err:
                self.gone = True


def report(term: Terminal, run: EngineRun, result: RunResult, resume_hint: str) -> None:
    """How a run ended, the same for every front end: warnings and the outcome on stderr, the
    JSON summary on stdout (if stdout went with the terminal, it is in the database: `evotui show`)."""
    for warning in run.warnings:
        term.say(f"evotui: warning: {warning}")
    if result.summary.get("seed_failed"):
        term.say(f"evotui: warning: the seed failed its evaluator ({result.summary['seed_failed']}); it counted as "
                 "generation 0 with score 0")
    if result.status == "failed":
        term.say(f"evotui: run failed: {result.reason}")
    elif result.exit_code == EXIT_IO:
        term.say(f"evotui: error: {result.reason}")
    elif result.status == "interrupted":
        if result.exit_code == EXIT_EVALUATOR_LOST:  # the cluster went away: say so before the hint
            term.say(f"evotui: error: {result.reason}")
        term.say(f"evotui: run interrupted; continue with: {resume_hint}")
    term.say(closing_line(result.summary))
    term.write(sys.stdout, json.dumps(result.summary))


def _score(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def closing_line(summary: dict) -> str:
    """The run's end in one human-readable line (the JSON summary follows on stdout)."""
    s = summary
    merges = f" and {s.get('merges_accepted', 0)} of {s.get('merges_tried', 0)} merges" if s.get("merges_tried") else ""
    sim = " (simulated)" if s.get("simulated") else ""
    made, attempts = s.get("proposals", 0), s.get("proposal_attempts", 0)
    tries = f" ({attempts} attempts)" if attempts != made else ""
    # Every outcome the JSON counts: stale discards and chain-mode superseded heads when there are any.
    extra = "".join(f", {s[k]} {word}" for k, word in (("discarded_stale", "stale"), ("superseded", "superseded"))
                    if s.get(k))
    return (f"evotui: {s['status']}: best {_score(s.get('best_score'))} ({s.get('best_id') or '-'}, seed "
            f"{_score(s.get('seed_score'))}) after {made} proposals{tries}{merges}; "
            f"{s.get('accepted', 0)} accepted, {s.get('rejected', 0)} rejected, {s.get('failed', 0)} failed{extra}; "
            f"{s.get('llm_calls', 0)} LLM calls in {s.get('wall_s', 0):.1f} s{sim}; strategy {s.get('strategy', '-')}")


def spend_line(run: EngineRun) -> str:
    """The run's start: what an item may cost at most (the budget's worst-case reservation) and
    what that means for a money cap; `evotui estimate` gives the expected figures."""
    budget = run.ctx.budget
    worst = budget.worst_case(run.orchestrator.handlers.estimate())
    spent = budget.spent
    parts = [f"spent so far ${spent['usd']:.4f}" + (f", {spent['gpu_s'] / 3600:.4f} GPU-h" if spent["gpu_s"] else ""),
             f"an item reserves up to ${worst.get('usd', 0.0):.4f}"
             + (f" and {worst['gpu_s'] / 3600:.4f} GPU-h" if worst.get("gpu_s") else "")]
    for key, unit in (("usd", "--max-usd"), ("gpu_s", "--max-gpu-hours")):
        cap, each = budget.limit(key), worst.get(key, 0.0)
        if cap is not None and each > 0:
            parts.append(f"{unit} leaves room for at least {max(0, int((cap - spent[key]) // each))} items at that worst case")
    return f"evotui: spend: {'; '.join(parts)} (`evotui estimate` predicts the expected spend)"


def gpu_slots_text(run: EngineRun) -> str:
    """" gpu busy/slots", with per-GPU counts, when evaluations lease GPU slots; else ""."""
    slots = (run.orchestrator.handlers.figures().get("evaluator") or {}).get("gpu_slots") or {}
    if "slots" not in slots:
        return ""
    per = " ".join(f"{d}:{n}" for d, n in slots["by_gpu"].items())
    return f" gpu {slots['busy']}/{slots['slots']} ({per})"


def progress_line(s: EngineSnapshot, width: int = 200, gpu: str = "", progress: Progress | None = None) -> str:
    """A progress line: the compact form fits 80 columns; wider terminals get queues and LLM use.
    Accepted counts merges too: they are shown apart (merges are not proposals). gpu: busy slots.
    progress: N/budget and the ETA (compact form) and the rate without paused time (wide form)."""
    elapsed = f"{s.elapsed_s:5.1f}s" if s.elapsed_s < 1000 else f"{s.elapsed_s / 60:.0f}m"  # minutes keep it short
    merges = f" merges {s.merges_accepted}" if s.merges_accepted else ""
    count = budget_text(progress) if progress is not None else f"prop {s.proposal_attempts}"
    head = f"[{elapsed} {s.state}] v{s.pool_version} best {_score(s.best_score)} {count}"
    # Shorter forms in turn until one fits: what is left out is in the wide form and the summary.
    forms = [f"{head} acc {s.accepted} rej {s.rejected} fail {s.failed}{merges}{gpu}",
             f"{head} acc {s.accepted} rej {s.rejected} fail {s.failed}{merges}{gpu.split(' (')[0]}",
             f"{head} acc {s.accepted} rej {s.rejected}{merges}{gpu.split(' (')[0]}",
             f"{head} acc {s.accepted}{gpu.split(' (')[0]}"]
    compact = next((f for f in forms if len(f) <= min(width, 80)), forms[-1])
    if width < 120:
        return compact
    compact = forms[0]
    queues = " ".join(f"{st.name}:{st.depth}/{st.busy}/{st.workers}" for st in s.stages)
    sim = " [SIMULATED]" if s.simulated else ""
    chains = f" | chains running/count {s.chains_running}/{s.chain_count}" if s.chains_max else ""
    rate = f" | {rate_text(progress, s.simulated)}" if progress is not None else ""
    return (f"{compact} stale {s.discarded_stale} (seed {_score(s.seed_score)}){sim} | q depth/busy/workers "
            f"{queues} | llm {s.llm_calls} calls {s.prompt_tokens + s.completion_tokens} tok{chains}{rate}")


def _width(stream: TextIO) -> int:
    """The terminal's width; a file or pipe gets the wide form."""
    return shutil.get_terminal_size((200, 24)).columns if stream.isatty() else 200


async def _write_events(sub: Subscription, out: TextIO) -> None:
    try:
        while True:
            batch = await sub.wait()
            for event in batch:
                out.write(json.dumps(event.to_dict(), default=str) + "\n")
            out.flush()
            if sub.closed and not batch:
                break
    finally:
        if sub.dropped:
            out.write(json.dumps({"event": "events_dropped", "count": sub.dropped}) + "\n")
            out.flush()


class ProgressReporter:
    """One progress line from the run now: its snapshot, busy GPU slots, N/budget, ETA and the
    rate without the paused time (counted from the run's state changes since this session began)."""

    def __init__(self, run: EngineRun) -> None:
        self.run = run
        self.baseline = dict(run.ctx.budget.spent)  # a resumed run's earlier work is not this session's rate
        self.pauses = PauseClock(run.bus.subscribe(maxlen=100_000))

    def line(self, width: int) -> str:
        snap = self.run.snapshot()
        progress = progress_of(snap, self.baseline, self.pauses.paused_s())
        return progress_line(snap, width, gpu_slots_text(self.run), progress)

    def close(self) -> None:
        self.run.bus.unsubscribe(self.pauses.sub)


async def _progress(reporter: ProgressReporter, every_s: float, term: Terminal) -> None:
    while True:
        await asyncio.sleep(every_s)
        term.say(reporter.line(_width(term.err)))


async def drive(run: EngineRun, *, events_path: Path | None, progress_every: float, quiet: bool,
                term: Terminal | None = None) -> RunResult:
    loop = asyncio.get_running_loop()
    term = term or Terminal(sys.stderr)
    signals_seen = 0

    def on_signal(signame: str) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signame == "SIGHUP":
            term.hung_up = True
        if signals_seen == 1:
            term.say(f"evotui: {signame}: draining (in-flight work finishes); send again to stop now")
            run.drain(f"{signame} received")
        else:
            term.say(f"evotui: {signame}: stopping now; `evotui resume {run.ctx.run_id}` continues")
            run.stop(f"{signame} received twice")

    def on_usr1() -> None:
        snap = run.snapshot()
        if snap.state == "paused":
            run.resume_work()
        else:
            run.pause()
        term.say(f"evotui: SIGUSR1: {run.snapshot().state}")

    for sig in HANGUP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig.name)
    loop.add_signal_handler(signal.SIGUSR1, on_usr1)
    tasks: list[asyncio.Task] = []
    reporter: ProgressReporter | None = None
    events_file: TextIO | None = None
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    try:
        if not await control.start() and not quiet:
            term.say(f"evotui: {control.problem}")
        if events_path is not None:
            events_file = sys.stdout if str(events_path) == "-" else events_path.open("a", encoding="utf-8")
            # Subscribe now, not inside the task, so run_started is not missed.
            tasks.append(asyncio.create_task(_write_events(run.bus.subscribe(maxlen=100_000), events_file)))
        if not quiet:
            if run.ctx.config.uses_sim:
                term.say(
                    f"evotui: SIMULATED LLM backend ({run.ctx.backend}, time scale x{run.ctx.config.sim.time_scale:g}); "
                    "scores and speeds are simulated, not real model results")
            term.say(f"evotui: run {run.ctx.run_id} in {run.db_path} ({'resumed' if run.resumed else 'new'})")
            term.say(spend_line(run))
            reporter = ProgressReporter(run)
            tasks.append(asyncio.create_task(_progress(reporter, progress_every, term)))
        result = await run.run()
        if reporter is not None:  # the last progress line is the final state
            term.say(reporter.line(_width(term.err)))
        if tasks and events_path is not None:
            # Let the event writer flush what the run published last.
            await asyncio.wait_for(asyncio.shield(tasks[0]), timeout=5)
        return result
    finally:
        if reporter is not None:
            reporter.close()
        await control.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sig in (*HANGUP_SIGNALS, signal.SIGUSR1):
            loop.remove_signal_handler(sig)
        if events_file is not None and events_file is not sys.stdout:
            events_file.close()
