"""Shared helpers of the orchestrator and runner tests: a tiny keyword task and a scripted LLM.

The task: every example names a keyword ("Item: alpha"); the metric gives 0.9 when the output
contains it (never 1.0, so rollout never skips a step) and otherwise feedback
"missing keyword alpha".

An output "RAISE" makes the metric raise (a broken metric).

The LLM (an httpx.MockTransport handler, injected through engine.run.setup.sim_transport):
- rollout / evaluate: answers the example's keyword if the system prompt contains
  "KEYWORD-<keyword>", else "unknown";
- propose: copies the current instructions (first fenced block of the user message) and adds
  "KEYWORD-<k>" for the first keyword named by a "missing keyword" feedback line, or a fresh
  "NOTE-<n>" line when nothing is missing (a change that does not help: rejected).
- reflect (reflective staleness): a scripted verdict per item (`verdicts`, default
  `default_verdict` = "keep"): keep / discard as VERDICT lines, patch = the current best plus the
  proposal's lines the best lacks in one fenced block, malformed = no VERDICT line, length = a
  keep verdict cut off with finish_reason "length".
Requests can be held by gates (asyncio.Event) and answers replaced per request (`override`).
Every request start/end and every bus event go to one `timeline` so tests can check ordering.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx
import pytest

from engine.run import setup as run_setup
from engine.run.runner import EngineRun, RunResult
from engine.stages.prompt_stages import current_item
from engine.store.store import read_only_open

TRAIN_KEYWORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
VAL_KEYWORDS = ["alpha", "gamma", "epsilon", "omega"]

METRIC = '''
def score(example, output):
    if output == "RAISE":
        raise ValueError("metric exploded")
    kw = example["keyword"]
    if kw in output:
        return {"score": 0.9, "feedback": "ok"}
    return {"score": 0.0, "feedback": "missing keyword " + kw}
'''

TASK_TOML = '''
name = "kw"
kind = "prompt"
description = "Say the keyword of the item"
seed_prompt = "seed_prompt.txt"
train = "train.jsonl"
val = "val.jsonl"

[metric]
file = "metric.py"
function = "score"
'''

SEED_PROMPT = "Answer with one word."
FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)


def write_task(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(TASK_TOML)
    (folder / "seed_prompt.txt").write_text(SEED_PROMPT + "\n")
    (folder / "metric.py").write_text(METRIC)
    rows = lambda prefix, kws: "".join(  # noqa: E731
        json.dumps({"id": f"{prefix}{n}", "input": f"Item: {kw}", "keyword": kw}) + "\n" for n, kw in enumerate(kws)
    )
    (folder / "train.jsonl").write_text(rows("t", TRAIN_KEYWORDS))
    (folder / "val.jsonl").write_text(rows("v", VAL_KEYWORDS))
    return folder


def completion(text: str, finish: str = "stop") -> httpx.Response:
    body = {
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    return httpx.Response(200, json=body)


@dataclass
class Req:
    seq: int
    stage: str
    item_id: str | None
    system: str
    user: str
    orch_in_flight: int | None

    def current(self) -> str:
        m = FENCE.search(self.user)
        return m.group(1).strip() if m else ""

    def blocks(self) -> list[str]:
        """Every fenced block of the user message, stripped."""
        return [b.strip() for b in FENCE.findall(self.user)]

    def keyword(self) -> str:
        """The keyword of a rollout / evaluate request ("Item: <kw>"), or ""."""
        m = re.search(r"Item: (\w+)", self.user)
        return m.group(1) if m else ""

    def keywords(self) -> list[str]:
        """Every "Item: <kw>" of the user message (the traces of a propose request)."""
        return re.findall(r"Item: (\w+)", self.user)


@dataclass
class Gate:
    predicate: Callable[[Req], bool]
    event: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: list[Req] = field(default_factory=list)

    def release(self) -> None:
        self.event.set()


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[Req] = []
        self.timeline: list[tuple] = []
        self.gates: list[Gate] = []
        self.override: Callable[[Req], httpx.Response | None] | None = None
        self.run = None
        self.active: Counter = Counter()
        """item_id -> requests of that item currently inside the handler."""
        self.max_items_active = 0
        self._seq = itertools.count(1)
        self._notes = itertools.count(1)
        self.verdicts: dict[str, str] = {}
        """item_id -> scripted reflect verdict: keep | patch | discard | malformed | length."""
        self.default_verdict = "keep"

    # -- wiring ---------------------------------------------------------------------------
    def transport(self, _cfg=None, *_a, **_kw) -> tuple[httpx.MockTransport, None]:
        return httpx.MockTransport(self.handler), None

    def attach(self, run) -> None:
        """Observe a run: its orchestrator's in_flight and every bus event (into the timeline)."""
        self.run = run
        bus = run.ctx.bus
        publish = bus.publish

        def logged(event) -> None:
            self.timeline.append(("event", event.kind, getattr(event, "item_id", None)))
            publish(event)

        bus.publish = logged

    def hold(self, predicate: Callable[[Req], bool]) -> Gate:
        gate = Gate(predicate)
        self.gates.append(gate)
        return gate

    def release_all(self) -> None:
        for gate in self.gates:
            gate.release()

    # -- queries --------------------------------------------------------------------------
    def of(self, stage: str | None = None, item_id: str | None = None) -> list[Req]:
        return [r for r in self.requests if (stage is None or r.stage == stage) and (item_id is None or r.item_id == item_id)]

    def items_seen(self) -> list[str]:
        seen: list[str] = []
        for r in self.requests:
            if r.item_id is not None and r.item_id not in seen:
                seen.append(r.item_id)
        return seen

    # -- the server -----------------------------------------------------------------------
    async def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "sim-qwen3-8b", "object": "model"}]})
        body = json.loads(request.content)
        msgs = body["messages"]
        orch = self.run.orchestrator if self.run is not None else None
        req = Req(
            seq=next(self._seq),
            stage=request.headers.get("X-Evotui-Stage", ""),
            item_id=current_item.get(),
            system=msgs[0]["content"],
            user=msgs[-1]["content"],
            orch_in_flight=orch.in_flight if orch is not None else None,
        )
        self.requests.append(req)
        self.timeline.append(("start", req.stage, req.item_id, req.seq))
        self.active[req.item_id] += 1
        self.max_items_active = max(self.max_items_active, sum(1 for k, v in self.active.items() if v and k))
        try:
            for gate in self.gates:
                if not gate.event.is_set() and gate.predicate(req):
                    gate.arrived.append(req)
                    await gate.event.wait()
            if self.override is not None:
                resp = self.override(req)
                if resp is not None:
                    return resp
            return self.answer(req)
        finally:
            self.active[req.item_id] -= 1
            self.timeline.append(("end", req.stage, req.item_id, req.seq))

    def answer(self, req: Req) -> httpx.Response:
        if req.stage == "propose":
            return completion(self.propose_text(req))
        if req.stage == "reflect":
            return self.reflect_answer(req)
        m = re.search(r"Item: (\w+)", req.user)
        kw = m.group(1) if m else ""
        return completion(kw if kw and f"KEYWORD-{kw}" in req.system else "unknown")

    def reflect_answer(self, req: Req) -> httpx.Response:
        verdict = self.verdicts.get(req.item_id or "", self.default_verdict)
        if verdict == "length":
            return completion("VERDICT: keep\nREASON: still usef", finish="length")
        if verdict == "malformed":
            return completion("Hard to say; the proposal looks fine to me, probably.")
        if verdict == "patch":
            blocks = req.blocks()
            best, proposed = blocks[0], blocks[1]
            extra = [ln for ln in proposed.splitlines() if ln.strip() and ln not in best.splitlines()]
            patched = "\n".join([best, *extra])
            return completion(f"VERDICT: patch\nREASON: rebase its new lines onto the best\n```\n{patched}\n```\n")
        return completion(f"VERDICT: {verdict}\nREASON: scripted {verdict}")

    def propose_text(self, req: Req) -> str:
        current = req.current()
        missing = re.findall(r"Feedback: missing keyword (\w+)", req.user)
        extra = f"KEYWORD-{missing[0]}" if missing else f"NOTE-{next(self._notes)}"
        return f"Improved instructions:\n```\n{current}\n{extra}\n```\n"


HANG_S = 60.0
"""Wall-clock limit for waiting on the engine. It only turns a hang into a failure: a passing
test returns as soon as what it waits for happens, so a loaded machine cannot fail it."""


async def until(predicate: Callable[[], bool], timeout: float = HANG_S, what: str = "condition") -> None:
    """Let the loop (and the store's writer thread) run until predicate() holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def idle(seconds: float = 0.03) -> None:
    """Give the engine a chance to do something it should not do."""
    await asyncio.sleep(seconds)


# -- running the engine against the fake ----------------------------------------------------

ITEM_EVENTS = ("candidate_selected", "proposal_start", "proposal_end", "evaluation_start", "evaluation_end",
               "candidate_accepted", "candidate_rejected")


class Harness:
    """Creates runs of the keyword task on the fake LLM and cleans up runs a failed test left running."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.task_dir = write_task(tmp_path / "kwtask")
        self.db = tmp_path / "runs.db"
        self.fake = FakeLLM()
        monkeypatch.setattr(run_setup, "sim_transport", self.fake.transport)
        self._started: list[tuple[EngineRun, asyncio.Task]] = []

    @staticmethod
    def layer(pipeline: dict | None = None, budget: dict | None = None, seed: int = 0) -> dict:
        return {
            "seed": seed,
            "task_llm": {"max_retries": 0},
            # Merges off unless a test asks: most tests count items and requests exactly.
            "pipeline": {"minibatch_size": 3, "merge": False, **(pipeline or {})},
            "budget": budget or {},
        }

    async def create(self, pipeline: dict | None = None, budget: dict | None = None, seed: int = 0) -> EngineRun:
        run = await EngineRun.create(str(self.task_dir), [("test", self.layer(pipeline, budget, seed))], self.db)
        self.fake.attach(run)
        return run

    async def resume(self, run_id: str, overrides: dict | None = None) -> EngineRun:
        run = await EngineRun.resume(self.db, run_id, overrides or {})
        self.fake.attach(run)
        return run

    def start(self, run: EngineRun) -> asyncio.Task:
        task = asyncio.create_task(run.run())
        self._started.append((run, task))
        return task

    async def finish(self, task: asyncio.Task, timeout: float = HANG_S) -> RunResult:
        return await asyncio.wait_for(task, timeout)

    async def run_to_end(self, run: EngineRun, timeout: float = HANG_S) -> RunResult:
        return await self.finish(self.start(run), timeout)

    async def record(self, run_id: str):
        store = await read_only_open(self.db)
        try:
            return await store.load_run(run_id)
        finally:
            await store.close()

    async def rows(self, table: str, run_id: str) -> list[dict]:
        store = await read_only_open(self.db)
        try:
            return await store.fetch_rows(table, run_id)
        finally:
            await store.close()

    async def cleanup(self) -> None:
        for run, task in self._started:
            if not task.done():
                run.stop("test teardown")
                self.fake.release_all()
                try:
                    await asyncio.wait_for(task, 2.0)
                except BaseException:  # noqa: BLE001 - teardown must not mask the test's failure
                    pass


@pytest.fixture
async def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    h = Harness(tmp_path, monkeypatch)
    yield h
    await h.cleanup()


def item_events(events, item_id: str) -> list[str]:
    return [e.kind for e in events if getattr(e, "item_id", None) == item_id and e.kind in ITEM_EVENTS]
