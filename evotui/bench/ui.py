"""`evotui bench-ui`: what the TUI costs.

Throughput: the same run (task, budget, seed, simulated backend at the same time scale) is driven
headless (the --no-ui path) and under the TUI (Textual's headless driver, which renders every
frame but writes it nowhere) alternately; throughput is proposals per simulated minute of
pipeline time, median over repeats. Target: TUI/headless >= 0.95.

Terminal traffic: the real `evotui run` (Textual's LinuxDriver) runs in a pseudo-terminal of each
size and every byte it writes is read from the master side and counted, first while the run is
running, then after space has paused it (once the pause notice has gone). This is what an SSH
link would carry. Target: bytes per second while paused near zero.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from engine.run.runner import EngineRun, SetupError
from evotui import scratch
from evotui.control import ControlServer, socket_path
from evotui.headless import drive


def _layer(proposals: int, time_scale: float, seed: int) -> list[tuple[str, dict]]:
    return [("bench-ui", {"seed": seed, "sim": {"time_scale": time_scale, "seed": seed},
                          "budget": {"max_proposals": proposals}})]


async def headless_once(task: str, layer, db: Path) -> dict:
    run = await EngineRun.create(task, layer, db)
    result = await drive(run, events_path=None, progress_every=2.0, quiet=True)
    return result.summary


async def tui_once(task: str, layer, db: Path, size: tuple[int, int]) -> dict:
    from evotui.tui.app import EvoApp
    from evotui.tui.backend import LiveBackend
    from evotui.tui.launch import prepare

    run = await EngineRun.create(task, layer, db)
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    await control.start()
    app = EvoApp(LiveBackend(run), engine=run.run)
    app._theme_name = prepare(app, None, [])
    try:
        async with app.run_test(size=size):
            # Plain waits, not Pilot.pause(): a pause walks every widget and forces a screen
            # update, a cost of the harness that a user's terminal never pays.
            while app.engine_task is None:
                await asyncio.sleep(0.05)
            await asyncio.wait({app.engine_task})
            ticks = app.sampler.ticks
    finally:
        await control.close()
    summary = app.engine_task.result().summary
    summary["ui_ticks"] = ticks
    return summary


def spawn_in_pty(argv: list[str], size: tuple[int, int], cwd) -> tuple[int, subprocess.Popen]:
    """(master fd, process): `argv` on the slave side of a new pseudo-terminal of `size` (cols,
    rows), in its own session, with the size also exported (COLUMNS/LINES, as a shell would)."""
    cols, rows = size
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    env.pop("TEXTUAL", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    return master, proc


class PtyTerm:
    """`evotui run` on the slave side of a pseudo-terminal; the master side is drained all the time
    (a full pty buffer would block the TUI's writes and understate its cost) and counted."""

    def __init__(self, argv: list[str], size: tuple[int, int], cwd: str) -> None:
        self.master, self.proc = spawn_in_pty(argv, size, cwd)
        self.total = 0

    def pump(self, seconds: float) -> bytes:
        """Read for `seconds`; returns what was read in that time."""
        got = bytearray()
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                continue
            try:
                got += os.read(self.master, 65536)
            except OSError:  # EIO: the child closed the terminal
                raise RuntimeError(f"the TUI exited early; last output: {bytes(got[-400:])!r}") from None
        self.total += len(got)
        return bytes(got)

    def wait_for(self, needle: bytes, timeout: float) -> None:
        """Wait until `needle` is written (searched in the raw stream; Textual writes a short word
        such as a state name in one run of text)."""
        seen = b""
        end = time.monotonic() + timeout
        while needle not in seen:
            if time.monotonic() > end:
                raise RuntimeError(f"{needle!r} never appeared; last output: {seen[-400:]!r}")
            seen += self.pump(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


def bytes_once(task: str, time_scale: float, size: tuple[int, int], window: float, tmp: str) -> dict:
    """Bytes per second the real TUI writes while running and while paused."""
    db = Path(tmp) / f"bytes-{size[0]}x{size[1]}-{time.monotonic_ns()}.db"
    argv = [sys.executable, "-m", "evotui.cli", "run", task, "--db", str(db), "--max-proposals", "1000000",
            "--time-scale", f"{time_scale:g}", "--no-mouse"]
    term = PtyTerm(argv, size, tmp)
    try:
        term.wait_for(b"RUNNING", timeout=60)
        term.pump(2.0)  # first full paints, startup notices
        running = len(term.pump(window)) / window
        os.write(term.master, b" ")
        term.wait_for(b"PAUSED", timeout=10)
        term.pump(5.0)  # the "Paused" notice times out (3 s) and in-flight work finishes
        paused = len(term.pump(window)) / window
    finally:
        term.close()
    return {"running_Bps": round(running), "paused_Bps": round(paused)}


def terminal_traffic(args: argparse.Namespace) -> dict:
    sizes = [s.strip() for s in getattr(args, "bytes_sizes", "80x24,160x48").split(",") if s.strip()]
    window = float(getattr(args, "bytes_window", 5.0))
    out: dict = {}
    with scratch.directory("evotui-bench-bytes-") as tmp:
        for label in sizes:
            w, _, h = label.partition("x")
            runs = [bytes_once(args.task, args.time_scale, (int(w), int(h)), window, tmp) for _ in range(args.repeats)]
            out[label] = {key: {"median": round(statistics.median(r[key] for r in runs)), "runs": [r[key] for r in runs]}
                          for key in ("running_Bps", "paused_Bps")}
    return out


async def bench(args: argparse.Namespace) -> dict:
    w, _, h = args.size.partition("x")
    size = (int(w), int(h))
    rows: dict[str, list[dict]] = {"headless": [], "tui": []}
    with scratch.directory("evotui-bench-ui-") as tmp:
        for i in range(args.repeats):
            layer = _layer(args.proposals, args.time_scale, seed=i)
            order = ("headless", "tui") if i % 2 == 0 else ("tui", "headless")
            for kind in order:
                db = Path(tmp) / f"{kind}-{i}.db"
                if kind == "headless":
                    rows[kind].append(await headless_once(args.task, layer, db))
                else:
                    rows[kind].append(await tui_once(args.task, layer, db, size))
    out: dict = {"task": args.task, "proposals": args.proposals, "time_scale": args.time_scale,
                 "repeats": args.repeats, "size": args.size}
    for kind, summaries in rows.items():
        rates = [s["proposals_per_min"] or 0.0 for s in summaries]
        out[kind] = {"proposals_per_sim_min": round(statistics.median(rates), 3), "runs": [round(r, 3) for r in rates],
                     "wall_s": round(statistics.median(s["wall_s"] for s in summaries), 2)}
        if kind == "tui":
            out[kind]["ui_ticks"] = [s["ui_ticks"] for s in summaries]
    base = out["headless"]["proposals_per_sim_min"]
    out["ratio_tui_over_headless"] = round(out["tui"]["proposals_per_sim_min"] / base, 4) if base else None
    return out


def main(args: argparse.Namespace) -> int:
    try:
        out = asyncio.run(bench(args)) if not getattr(args, "bytes_only", False) else {}
        if not getattr(args, "no_bytes", False):
            out["terminal_bytes"] = terminal_traffic(args)
    except SetupError as exc:
        print(f"evotui: error: {exc}")
        return exc.exit_code
    if args.json:
        print(json.dumps(out))
        return 0
    if "headless" in out:
        _print_throughput(out)
    for label, r in out.get("terminal_bytes", {}).items():
        print(f"  terminal {label:<8} {r['running_Bps']['median']:>7} B/s running, {r['paused_Bps']['median']:>6} B/s paused"
              f" (runs {r['running_Bps']['runs']} / {r['paused_Bps']['runs']})")
    return 0


def _print_throughput(out: dict) -> None:
    print(f"bench-ui: {out['task']}, {out['proposals']} proposals, time scale x{out['time_scale']:g}, "
          f"{out['repeats']} repeats, TUI at {out['size']} (simulated backend)")
    for kind in ("headless", "tui"):
        r = out[kind]
        print(f"  {kind:<9} {r['proposals_per_sim_min']:8.3f} proposals/sim-min (runs {r['runs']}, median wall {r['wall_s']}s)")
    ratio = out["ratio_tui_over_headless"]
    verdict = "within" if ratio is not None and ratio >= 0.95 else "OVER"
    print(f"  ratio tui/headless = {ratio} ({verdict} the 5% budget)")


def _parser() -> argparse.ArgumentParser:
    """`python -m evotui.bench.ui`: the bench-ui options plus the terminal-traffic ones."""
    p = argparse.ArgumentParser(prog="python -m evotui.bench.ui", description=__doc__.split("\n\n")[0])
    p.add_argument("task", nargs="?", default="rules")
    p.add_argument("--proposals", type=int, default=40)
    p.add_argument("--time-scale", type=float, default=100.0)
    p.add_argument("--repeats", type=int, default=3, help="runs per front end (median reported)")
    p.add_argument("--size", default="160x48", help="TUI terminal size for the throughput runs, WxH")
    p.add_argument("--bytes-sizes", default="80x24,160x48", help="pty sizes for the traffic runs, comma-separated")
    p.add_argument("--bytes-window", type=float, default=5.0, help="seconds counted running, then paused")
    p.add_argument("--bytes-only", action="store_true", help="only the terminal traffic")
    p.add_argument("--no-bytes", action="store_true", help="only the throughput")
    p.add_argument("--json", action="store_true")
    return p


if __name__ == "__main__":
    sys.exit(main(_parser().parse_args()))
