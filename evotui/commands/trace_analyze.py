"""`evotui analyze`: the front end of engine/trace/analyze."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from engine.trace.analyze import html, report
from engine.trace.analyze.run import analyze
from engine.trace.errors import TraceError
from engine.trace.llm import Choice
from evotui.commands.trace_db import open_db


def _write_atomic(path: Path, text: str) -> None:
    if not path.parent.is_dir():
        raise TraceError(f"{path.parent} is not a folder")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


async def run(args: argparse.Namespace) -> int:
    # Writable: the judge's answers are cached in the database (schema v5).
    store = await open_db(args.db, readonly=args.no_judge)
    try:
        choice = Choice(url=args.llm_url, model=args.model, sim=args.llm == "sim", api_key_env=args.api_key_env)
        result = await analyze(store, args.run_id, judge=not args.no_judge, choice=choice)
    finally:
        await store.close()
    if args.html:
        _write_atomic(args.html, html.render(result))
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(report.text(result))
        if args.html:
            print(f"\nwrote {args.html}")
    return 0
