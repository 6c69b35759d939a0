"""`evotui local serve`: the managed llama.cpp server on its own, for other tools and for
`evotui run --llm-url`. Runs until SIGINT/SIGTERM, then stops the server by its PID."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from engine.llm.local import LocalServer, LocalServerError, resolve_model


def add_arguments(local) -> None:
    lsub = local.add_subparsers(dest="local_command", metavar="SUBCOMMAND")
    serve = lsub.add_parser("serve", help="serve a GGUF model on 127.0.0.1 (OpenAI-compatible /v1) until Ctrl-C")
    serve.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 = a free one)")
    serve.add_argument("--model-path", metavar="FILE.gguf", help="model (default: the bundled SmolLM2-135M)")
    serve.add_argument("--parallel", type=int, default=4, help="slots decoded together (default 4)")
    serve.add_argument("--ctx", type=int, default=2048, help="context tokens per slot (default 2048)")
    serve.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    serve.add_argument("--alias", default="local", help="model name the server answers to (default local)")
    serve.add_argument("--startup-timeout", type=float, default=120.0, metavar="SECONDS")


def main(args: argparse.Namespace) -> int:
    if args.local_command != "serve":
        print("evotui: error: use `evotui local serve [--port N --model-path FILE --parallel N --ctx N]`",
              file=sys.stderr)
        return 2
    for name in ("parallel", "ctx"):
        if getattr(args, name) < 1:
            print(f"evotui: error: --{name} must be at least 1", file=sys.stderr)
            return 2
    if not 0 <= args.port <= 65535:
        print("evotui: error: --port must be 0..65535", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args))
    except LocalServerError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code


async def _serve(args: argparse.Namespace) -> int:
    server = LocalServer(resolve_model(args.model_path), port=args.port, parallel=args.parallel, ctx=args.ctx,
                         threads=args.threads, aliases={args.alias}, startup_timeout_s=args.startup_timeout)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    why: list[str] = []

    def finish(reason: str) -> None:
        why.append(reason)
        done.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, finish, sig.name)
    try:
        await server.start()
        server.watch(finish)
        print(f"evotui: serving {server.model.name} at {server.url} as model '{args.alias}' (pid {server.pid}, "
              f"{server.parallel} slots x {server.ctx} tokens, ready in {server.startup_s:.1f}s); Ctrl-C stops it",
              file=sys.stderr, flush=True)
        print(json.dumps({"url": server.url, "model": args.alias, "pid": server.pid, "slots": server.parallel}),
              flush=True)
        await done.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        died = bool(why) and why[0] not in ("SIGINT", "SIGTERM")
        server.stop(keep_log=died)  # a dead server's log is named in the error below
    if why and why[0] not in ("SIGINT", "SIGTERM"):
        print(f"evotui: error: {why[0]}", file=sys.stderr)
        return 3
    print("evotui: local server stopped", file=sys.stderr)
    return 0
