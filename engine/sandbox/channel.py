"""The engine's side of the runner protocol: the spec goes in over one pipe, followed by the
per-evaluation nonce; the report comes back over another pipe whose write end only the runner's
supervisor holds (see engine/sandbox_support/evotui_sandbox_runner.py for the threat model): a line
per cascade stage that passed with stages still to run, then the final report."""

from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path

SUPPORT_DIR = Path(__file__).resolve().parents[1] / "sandbox_support"
RUNNER = SUPPORT_DIR / "evotui_sandbox_runner.py"
REPORT_CAP = 8 * 1024 * 1024
_PIPE_ROOM = 60_000
"""Bytes the spec pipe surely buffers (Linux: 64 KiB): written before the runner starts."""


def new_nonce() -> str:
    return secrets.token_hex(16)


def spec_pipe(spec: dict, nonce: str) -> int:
    """Read end of a pipe holding "<length>\\n<spec json><nonce>", write end closed."""
    payload = json.dumps(spec).encode()
    data = b"%d\n" % len(payload) + payload + nonce.encode()
    if len(data) > _PIPE_ROOM:
        raise ValueError(f"sandbox spec too large ({len(data)} bytes)")
    r, w = os.pipe()
    try:
        os.write(w, data)
    finally:
        os.close(w)
    return r


def command(prefix: tuple[str, ...], python: str, spec_fd: int, result_fd: int) -> list[str]:
    return [*prefix, python, "-I", "-B", str(RUNNER), str(spec_fd), str(result_fd)]


def parse_report(raw: bytes, nonce: str) -> tuple[dict | None, str]:
    """(report, "") or (None, why it is not usable)."""
    if not raw:
        return None, "the sandbox supervisor sent no report"
    try:
        report = json.loads(raw.decode("utf-8", "replace"))
    except json.JSONDecodeError as exc:
        return None, f"garbled report from the sandbox supervisor ({exc.msg})"
    if not isinstance(report, dict) or not secrets.compare_digest(str(report.get("nonce", "")), nonce):
        return None, "the sandbox report does not carry this evaluation's nonce; ignored"
    return report, ""


def stage_line(line: bytes, nonce: str) -> dict | None:
    """A stage line's {name, score, index, of} if `line` is one stamped with this evaluation's
    nonce; None for anything else (the final report is not a stage line)."""
    try:
        obj = json.loads(line.decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("stage"), dict):
        return None
    if not secrets.compare_digest(str(obj.get("nonce", "")), nonce):
        return None
    stage = obj["stage"]
    score = stage.get("score")
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        return None
    try:
        index, of = int(stage["index"]), int(stage["of"])
    except (KeyError, TypeError, ValueError):
        return None
    return {"name": str(stage.get("name", ""))[:100], "score": float(score), "index": index, "of": of}
