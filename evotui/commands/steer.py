"""`evotui steer RUN_OR_DB ACT ...`: steer a live run from any shell (another SSH session, a
script) through its driver's control socket (evotui/control.py, command `steer`).

    evotui steer RUN guide "prefer short rules" [--for N]   guidance for the next N proposals (or until unguide)
    evotui steer RUN unguide [N]                            withdraw guidance #N (default: all)
    evotui steer RUN pin ID [--for N] | unpin               the next parents are ID (N picks, or until unpin)
    evotui steer RUN ban ID | unban ID                      ID is never picked as a parent (until unban)
    evotui steer RUN reeval ID --heldout | --examples K     score ID on the held-out set or K more examples
    evotui steer RUN status                                 what is in force and every act so far (any run)

RUN_OR_DB is a run id (database from --db) or a database file (its newest running run). Every
act is a row of the steering table (who: "cli"), committed before the command reports it. Bad
input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from engine.steering import Act

ACTS = ("guide", "unguide", "pin", "unpin", "ban", "unban", "reeval", "status")
REEVAL_TIMEOUT_S = 1800.0


class SteerUsage(Exception):
    """A user mistake: one line, exit 2."""


def add_arguments(p: argparse.ArgumentParser, default_db: Path) -> None:
    p.add_argument("run", metavar="RUN_OR_DB", help="run id (see `evotui runs`), or a database file: its newest "
                                                    "running run")
    p.add_argument("--db", type=Path, default=default_db, help=f"SQLite database of RUN (default {default_db})")
    p.add_argument("--json", action="store_true", help="print the driver's reply as JSON")
    # --db and --json also after ACT (`steer RUN guide "..." --db X`); SUPPRESS keeps the value
    # given before ACT when they are not repeated after it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", type=Path, default=argparse.SUPPRESS, help="as before ACT")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="as before ACT")
    sub = p.add_subparsers(dest="act", metavar="ACT", required=True)

    def act(name: str, what: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=what, parents=[common])

    guide = act("guide", "free-text guidance shown to the proposer")
    guide.add_argument("text", help="what the next proposals should try or avoid")
    guide.add_argument("--for", dest="count", type=int, metavar="N", help="only the next N proposals "
                       "(default: until `unguide`)")
    unguide = act("unguide", "withdraw guidance (#N from `status`; default all)")
    unguide.add_argument("number", nargs="?", help="the guidance's number")
    pin = act("pin", "the next parents are this candidate")
    pin.add_argument("candidate", help="artifact id (see `evotui show RUN` or the lineage screen)")
    pin.add_argument("--for", dest="count", type=int, metavar="N", help="the next N parent picks (default: until "
                                                                        "`unpin`)")
    act("unpin", "end the pin")
    for name, what in (("ban", "never pick this candidate as a parent"), ("unban", "lift a ban")):
        act(name, what).add_argument("candidate", help="artifact id")
    reeval = act("reeval", "score a candidate on the held-out set or more examples")
    reeval.add_argument("candidate", help="artifact id")
    which = reeval.add_mutually_exclusive_group(required=True)
    which.add_argument("--heldout", action="store_true", help="the task's held-out split (or evaluator)")
    which.add_argument("--examples", type=int, metavar="K", help="K training examples it was not validated on")
    act("status", "guidance, pin and bans in force, and every steering act so far")


def request_of(args: argparse.Namespace) -> dict:
    """The control socket's `steer` request for the parsed command line."""
    act = args.act
    req: dict = {"cmd": "steer", "act": act, "by": "cli"}
    if act == "guide":
        req.update(text=args.text, count=args.count)
    elif act == "unguide":
        req["target"] = args.number.lstrip("#") if args.number else None
    elif act in ("pin", "ban", "unban", "reeval"):
        req["target"] = args.candidate
    if act == "pin":
        req["count"] = args.count
    if act == "reeval":
        req.update(heldout=bool(args.heldout), examples=args.examples)
    return req


def main(args: argparse.Namespace) -> int:
    try:
        out = asyncio.run(_steer(args))
    except SteerUsage as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


async def _steer(args: argparse.Namespace) -> str:
    db, run_id, status = await _locate(args)
    if args.act == "status" and status != "running":
        return _format_status(await _stored_status(db, run_id), args.json, run_id)
    if status != "running":
        raise SteerUsage(f"run {run_id} is {status}: steering acts on a live run; resume it (`evotui resume {run_id} "
                         f"--db {db}`) and steer again")
    from evotui.control import ControlClient, ControlError, socket_path

    client = ControlClient(socket_path(db, run_id))
    if not await client.connect():
        raise SteerUsage(f"run {run_id} is driven by a process that serves no control socket at "
                         f"{socket_path(db, run_id)}; steer it from that process's TUI")
    try:
        if args.act == "status":
            return _format_status(await client.request("steering"), args.json, run_id)
        req = request_of(args)
        timeout = REEVAL_TIMEOUT_S if args.act == "reeval" else 30.0
        reply = await client.request(req.pop("cmd"), reply_timeout_s=timeout, **req)
    except ControlError as exc:
        raise SteerUsage(f"run {run_id} refused: {exc}") from None
    finally:
        await client.close()
    return json.dumps(reply, indent=1) if args.json else "\n".join(f"{run_id}: {line}" for line in reply["lines"])


async def _locate(args: argparse.Namespace) -> tuple[Path, str, str]:
    """(database, run id, live status) of RUN_OR_DB."""
    from engine.store.errors import StoreError
    from engine.store.store import read_only_open

    given = Path(args.run).expanduser()
    db = given if given.is_file() else Path(args.db).expanduser()
    if not db.is_file():
        raise SteerUsage(f"no database at {db}; pass --db PATH (or the database file as RUN_OR_DB)")
    try:
        store = await read_only_open(db)
        try:
            runs = await store.list_runs()
        finally:
            await store.close()
    except StoreError as exc:
        raise SteerUsage(str(exc)) from None
    if given.is_file():
        live = [r for r in runs if r["status"] == "running"]
        if not live:
            raise SteerUsage(f"no run in {db} is running; list them with `evotui runs --db {db}`")
        return db, live[0]["run_id"], "running"
    found = [r for r in runs if r["run_id"] == args.run]
    if not found:
        raise SteerUsage(f"no run {args.run!r} in {db}; list runs with `evotui runs --db {db}`")
    return db, args.run, found[0]["status"]


async def _stored_status(db: Path, run_id: str) -> dict:
    """A stopped run's steering, from its rows: what a resume will carry on with."""
    from engine.steering import SteeringState
    from engine.store.store import read_only_open

    store = await read_only_open(db)
    try:
        rows = await store.fetch_rows("steering", run_id)
    finally:
        await store.close()
    state = SteeringState(Act.from_row(r) for r in rows)
    return {**state.view(), "history": [a.to_dict() | {"line": a.describe()} for a in state.acts if a.act != "use"]}


def _format_status(status: dict, as_json: bool, run_id: str) -> str:
    if as_json:
        return json.dumps(status, indent=1)
    lines = [f"run {run_id}"]
    for g in status["guidance"]:
        left = "until withdrawn" if g["left"] is None else f"{g['left']} proposal(s) left"
        lines.append(f"  guidance #{g['act_id']} ({left}, by {g['by']}): {g['text']}")
    if not status["guidance"]:
        lines.append("  no guidance")
    pin = status["pin"]
    if pin:
        left = "until unpinned" if pin["left"] is None else f"{pin['left']} pick(s) left"
        lines.append(f"  pinned parent: {pin['artifact_id']} ({left})")
    else:
        lines.append("  no pinned parent")
    lines.append(f"  banned: {', '.join(status['bans'])}" if status["bans"] else "  no bans")
    for r in status["reevals"]:
        lines.append(f"  re-evaluation #{r['act_id']} of {r['target']} not done")
    lines.append(f"acts ({len(status['history'])}):")
    lines += [f"  #{a['act_id']} {_clock(a['created_at'])} {a['by']}: {a['line']}" for a in status["history"]]
    return "\n".join(lines)


def _clock(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
