"""Local control channel: a unix socket at `<db path>.<run_id>.sock`, served by the process
that drives a run (`--no-ui` or the TUI), so `evotui attach` can observe and steer it.

Protocol: one JSON object per line in each direction. Request `{"cmd": NAME, ...args}`,
reply `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`. Commands:

  ping                                  {"pid": the driving process}: is its loop alive (resume --take-over)
  snapshot                              the live EngineSnapshot (engine.run.snapshot.build_snapshot) as JSON
  gpu_slots                             GPU slot occupancy of the run's evaluator ({"slots", "busy", "per_gpu", ...}),
                                        or null without [evaluator] gpus
  pending                               reviews waiting: item_id, gate, parent_id, parent_text, child_text, parked_at
  pause | resume                        hold / release the pipeline
  drain [reason]                        admit nothing more, finish in-flight work
  decide item_id decision [reason] [edited_text]    approve | reject | edit | skip
  approve_all [gate]
  set_gate gate on                      review gate "evaluate" | "update" on/off
  set_workers stage n                   returns the new target
  set_policy policy [max_gap]           "full" | "guarded" | "reflective"
  set_speculation on                    speculative evaluation on/off
  restore artifact_id [reason]          make an earlier validated artifact the active best (the ledger's
                                        restore, audited "by": "control"); returns the restore result
  edit_component component text [reason]  hot-swap: the active artifact with that component's new text is
                                        validated, committed through the ledger (a new component version)
                                        and made active (engine/components/hot_swap.py); a frozen component is refused
  steering                              what steering is in force: guidance (with proposals left), pin, bans,
                                        re-evaluations not done, and the run's operator acts (engine/steering/)
  steer act [target] [text] [count] [heldout] [examples] [by]
                                        one steering act: guide text [count] | unguide [target] | pin target
                                        [count] | unpin | ban target | unban target | reeval target heldout|examples;
                                        audited (a steering row, `by` default "control"), committed to the
                                        database before the reply; returns {"acts": [...], "lines": [...], "state"}

The socket file is mode 0600 (same user only) and removed when the run ends. Never imports textual.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from engine.run.snapshot import EngineSnapshot, LLMSnapshot, StageSnapshot
from engine.steering import SteerError
from engine.steering import live as steering
from engine.store.errors import StoreError

# Linux sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


def socket_path(db_path: Path | str, run_id: str) -> Path:
    return Path(f"{Path(db_path).expanduser().resolve()}.{run_id}.sock")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def snapshot_to_dict(snap: EngineSnapshot) -> dict:
    return _plain(snap)


_SNAPSHOT_FIELDS = frozenset(f.name for f in dataclasses.fields(EngineSnapshot))


def snapshot_from_dict(data: dict) -> EngineSnapshot:
    """The snapshot build_snapshot() made in the driving process, back from its JSON. Fields this
    release does not know (a newer driver) are dropped; ones it lacks (an older driver) default."""
    d = {k: v for k, v in data.items() if k in _SNAPSHOT_FIELDS}
    d["stages"] = tuple(StageSnapshot(**s) for s in d["stages"])
    d["llm"] = tuple(LLMSnapshot(**s) for s in d["llm"])
    d["gap_histogram"] = MappingProxyType({int(k): v for k, v in d["gap_histogram"].items()})
    for key in ("staleness", "budget_spent", "budget_limits", "review_gates", "filters",
                "calls_by_stage", "tokens_by_stage"):
        if key in d:
            d[key] = MappingProxyType(dict(d[key]))
    return EngineSnapshot(**d)


class ControlError(Exception):
    pass


class ControlServer:
    """Serves one EngineRun. start() returns False (with .problem set) if it cannot listen."""

    def __init__(self, run, path: Path) -> None:
        self.run = run
        self.path = path
        self.problem = ""
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.StreamWriter, asyncio.Task] = {}
        """Open client connections and their handler tasks: close() ends them first, so none is
        left to be cancelled at interpreter shutdown (asyncio then prints a traceback)."""

    async def start(self) -> bool:
        if len(os.fsencode(str(self.path))) > MAX_SOCKET_PATH:
            self.problem = f"control socket path too long for a unix socket ({self.path}); attach is read-only"
            return False
        if self.path.exists():
            if await _alive(self.path):
                self.problem = f"{self.path} is served by another process; attach is read-only"
                return False
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._client, path=str(self.path))
        except OSError as exc:
            self.problem = f"cannot listen on {self.path}: {exc}; attach is read-only"
            return False
        finally:
            os.umask(old)
        return True

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            handlers = list(self._connections.values())
            for writer in list(self._connections):
                writer.close()  # the handler's readline sees end of file and returns
            await asyncio.gather(*handlers, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[writer] = task
        try:
            while line := await reader.readline():
                writer.write((json.dumps(await self.handle_request(line), default=str) + "\n").encode())
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            self._connections.pop(writer, None)
            writer.close()

    def handle_line(self, line: bytes) -> dict:
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
                raise ControlError('a request is a JSON object with a "cmd" string')
            return {"ok": True, "result": self.execute(req)}
        except (ControlError, ValueError, KeyError, TypeError) as exc:
            return {"ok": False, "error": str(exc) or type(exc).__name__}
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the run; report it
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def execute(self, req: dict) -> Any:
        return apply_command(self.run, req)

    async def handle_request(self, line: bytes) -> dict:
        """handle_line, except for the commands that await work on the driver's loop (hot-swap:
        it validates the edited artifact before committing it)."""
        try:
            req = json.loads(line)
        except ValueError:
            return self.handle_line(line)
        if isinstance(req, dict) and req.get("cmd") == "steer":
            try:
                return {"ok": True, "result": await steer(self.run, req, str(req.get("by") or "control"))}
            except (SteerError, StoreError) as exc:
                return {"ok": False, "error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - a bad request must not end the run; report it
                return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(req, dict) or req.get("cmd") != "edit_component":
            return self.handle_line(line)
        from engine.components.hot_swap import HotSwapError, hot_swap

        try:
            result = await hot_swap(self.run.orchestrator.handlers, req.get("component"), req.get("text"),
                                    str(req.get("reason") or ""), by="control")
        except (HotSwapError, KeyError) as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "result": result}


def apply_command(run, req: dict) -> Any:
    """Carry out one control command on an in-process EngineRun (socket server and TUI alike)."""
    cmd = req["cmd"]
    if cmd == "ping":
        return {"pid": os.getpid()}
    if cmd == "snapshot":
        return snapshot_to_dict(run.snapshot())
    if cmd == "gpu_slots":
        return (run.orchestrator.handlers.figures().get("evaluator") or {}).get("gpu_slots")
    if cmd == "pending":
        return [dataclasses.asdict(p) for p in run.review.pending()]
    if cmd == "pause":
        run.pause()
    elif cmd == "resume":
        run.resume_work()
    elif cmd == "drain":
        run.drain(str(req.get("reason") or "drain requested"))
    elif cmd == "stop":
        run.stop(str(req.get("reason") or "stop requested"))
    elif cmd == "decide":
        run.review.decide(req["item_id"], req["decision"], reason=str(req.get("reason") or ""),
                          edited_text=req.get("edited_text"))
    elif cmd == "approve_all":
        return run.review.approve_all(req.get("gate"))
    elif cmd == "set_gate":
        run.review.set_enabled(req["gate"], bool(req["on"]))
    elif cmd == "set_workers":
        return run.set_workers(req["stage"], int(req["n"]))
    elif cmd == "set_policy":
        run.set_policy(req["policy"], req.get("max_gap"))
    elif cmd == "set_speculation":
        run.set_speculation(bool(req["on"]))
    elif cmd == "restore":
        return _restore(run, str(req["artifact_id"]), str(req.get("reason") or ""))
    elif cmd == "steering":
        return steering_status(run)
    elif cmd == "steer":
        raise ControlError("steer commits its act before replying: send it through the control socket, or await "
                           "evotui.control.steer in the driving process")
    elif cmd == "edit_component":
        raise ControlError("edit_component validates the edit before committing it: send it through the control "
                           "socket (ControlServer.handle_request awaits it)")
    else:
        raise ControlError(f"unknown command {cmd!r}")
    return run.snapshot().state


STEER_FIELDS = ("act", "target", "text", "count", "heldout", "examples")


async def steer(run, req: dict, by: str) -> dict:
    """One steering act on the live run (socket and TUI alike): checked, recorded, for a
    re-evaluation also carried out, and committed to the database before this returns, so an act
    the caller was told about survives a kill -9. SteerError (one line) when refused."""
    done = await steering.take_and_finish(run.ctx, {k: req.get(k) for k in STEER_FIELDS}, by)
    await run.ctx.store.flush()
    return {"acts": [a.to_dict() for a in done], "lines": [a.describe() for a in done],
            "state": run.ctx.steering.view()}


def steering_status(run) -> dict:
    """What is in force and the operator's acts so far (the engine's own `use` rows left out)."""
    acts = [a.to_dict() | {"line": a.describe()} for a in run.ctx.steering.acts if a.act != "use"]
    return {**run.ctx.steering.view(), "history": acts}


def _restore(run, artifact_id: str, reason: str) -> dict:
    """Runs on the driver's loop, between pipeline steps, so the live run switches at once."""
    from engine.run.admin import AdminError, restore_with

    try:
        return dataclasses.asdict(restore_with(run.ctx.ledger, artifact_id, reason, by="control"))
    except AdminError as exc:
        raise ControlError(str(exc)) from None


async def _alive(path: Path) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def answers(path: Path, timeout_s: float = 3.0) -> bool:
    """Whether a driver answers a ping on its socket within timeout_s. A stopped or wedged process
    may still accept the connection (the kernel queues it) but never replies; any reply counts,
    an error too (an older driver without `ping`), since it proves the loop runs."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), timeout_s)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        writer.write(b'{"cmd": "ping"}\n')
        await asyncio.wait_for(writer.drain(), timeout_s)
        return bool(await asyncio.wait_for(reader.readline(), timeout_s))
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        writer.close()


class ControlClient:
    """One connection to a ControlServer; request() raises ControlError on any failure."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def connect(self) -> bool:
        try:
            self._reader, self._writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.path)), 2.0)
        except (OSError, asyncio.TimeoutError):
            return False
        return True

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, cmd: str, *, reply_timeout_s: float = 5.0, **args: Any) -> Any:
        """One command; `reply_timeout_s` bounds the wait for its reply (a hot-swap validates first)."""
        if self._writer is None or self._reader is None:
            raise ControlError("not connected to the driving process")
        async with self._lock:
            try:
                self._writer.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
                await self._writer.drain()
                line = await asyncio.wait_for(self._reader.readline(), reply_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                await self.close()
                raise ControlError(f"control channel lost: {exc or type(exc).__name__}") from None
        if not line:
            await self.close()
            raise ControlError("the driving process closed the control channel (run finished?)")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "request failed"))
        return reply.get("result")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._reader = None
