"""Evaluations as Ray tasks ([evaluator] backend = "ray"): the same sandbox, on the cluster.

- Connection (engine/evaluator/ray_connection.py): address None starts a local Ray instance for
  the run (loopback only, a per-run token, no dashboard) and stops it in aclose(); "auto",
  "HOST:PORT" or "ray://HOST:PORT" joins a running cluster (with its token, if it has one), which
  outlives the run. A process that already called ray.init (an API user, a test) is used as it
  is and left running. Either way, nothing Ray prints on the driver goes to stdout.
- What travels: the task folder once per run through the object store (unpacked once per
  machine), the candidate with each request, and, on a cluster, the engine package itself
  (runtime env py_modules), so the nodes need Python and Ray but not evotui. The driver keeps
  the database, the pool and the LLM clients.
- Backpressure: at most `limit` evaluations are submitted at once; limit follows the cluster's
  resources (how many evaluations of [evaluator] num_cpus/num_gpus/memory_mb fit, counting the
  ones running), refreshed by a health probe every few seconds, and never exceeds max_in_flight.
- Faults: a task whose worker or node died is submitted again (max_retries times; Ray picks a
  live worker), then fails with the reason. A cluster that stops answering the probe within
  lost_after_s is lost: every waiting evaluation raises EvaluatorLost and nothing more is sent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engine
from engine.evaluator.ray_connection import RaySession
from engine.evaluator.ray_worker import EvalRequest, result_from, run_request
from engine.evaluator.service import EvaluatorLost, EvaluatorSetupError
from engine.evaluator.shipping import ShippingError, pack
from engine.sandbox import EvalResult, SandboxLimits
from engine.config.service import EvaluatorConfig

ENGINE_DIR = str(Path(engine.__file__).resolve().parent)


def _in_thread(fn: Callable[[], Any]) -> asyncio.Future:
    """fn() in a daemon thread: a call into a dead cluster may hang, and must not hold the
    process at exit the way the default executor's threads would."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def body() -> None:
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, which decides
            loop.call_soon_threadsafe(settle, False, exc)
            return
        loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=body, name="evotui-ray-call", daemon=True).start()
    return fut


def _consume(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


def capacity(needs: dict[str, float], total: dict, available: dict, running: int, max_in_flight: int | None,
             where: str = "") -> int:
    """Evaluations at once: as many as the cluster holds, and no more than fit now besides the
    `running` ones (other jobs may hold part of it); at least 1, at most max_in_flight."""
    if not needs:
        fits_total = fits_now = int(total.get("CPU", 1)) or 1
    else:
        missing = [k for k, v in needs.items() if total.get(k, 0) < v]
        if missing:
            k = missing[0]
            name = {"CPU": "num_cpus", "GPU": "num_gpus"}.get(k, "memory_mb")
            raise EvaluatorSetupError(f"one evaluation reserves {needs[k]:g} {k} but the Ray cluster at {where} has "
                                      f"{total.get(k, 0):g} in all; lower [evaluator] {name} or add such nodes")
        fits_total = min(math.floor(total.get(k, 0) / v) for k, v in needs.items())
        fits_now = running + min(math.floor(available.get(k, 0) / v) for k, v in needs.items())
    limit = max(1, min(fits_total, fits_now))
    return min(limit, max_in_flight) if max_in_flight else limit


class RayEvaluator:
    backend = "ray"

    def __init__(self, cfg: EvaluatorConfig, limits: SandboxLimits, secret_vars: frozenset[str]) -> None:
        if importlib.util.find_spec("ray") is None:
            raise ValueError('[evaluator] backend = "ray" needs Ray on this machine: pip install "evotui[ray]" '
                             "(or use --evaluator local)")
        self.cfg = cfg
        self.limits = limits
        self.secret_vars = secret_vars
        self.where = cfg.address or "a local Ray instance"
        self._ray: Any = None
        self._task: Any = None
        self._owns_connection = False
        self._session: RaySession | None = None
        self._start_lock = asyncio.Lock()
        self._cond = asyncio.Condition()
        self._bundles: dict[Path, tuple[str, Any]] = {}
        self._probe_task: asyncio.Task | None = None
        self._probing: asyncio.Future | None = None
        self.limit = 1
        self.running = 0
        self.completed = 0
        self.retried = 0
        self.gave_up = 0
        self.lost = ""
        self.nodes: set[str] = set()
        self.isolation = ""

    # -- connection --------------------------------------------------------------------------------
    async def start(self) -> None:
        async with self._start_lock:
            if self._ray is not None:
                return
            import ray

            if not ray.is_initialized():
                await self._reachable()
                session = RaySession(ray, self.cfg.address, self.cfg.auth_token_file)
                try:
                    # On the loop's thread, blocking it for the seconds Ray takes to start: Ray's
                    # driver must be initialised on the main thread (later calls may come from others).
                    session.open(self._init_args())
                except (ConnectionError, RuntimeError, ValueError, TimeoutError, ray.exceptions.RayError) as exc:
                    raise EvaluatorSetupError(f"cannot start or reach Ray at {self.where}: {_first_line(exc)}; "
                                              f"{session.hint()}") from None
                self._session = session
                self._owns_connection = True
            self._ray = ray
            self._task = ray.remote(run_request)
            await self._refresh(first=True)
            if self.lost:
                raise EvaluatorLost(self.lost)
            self._probe_task = asyncio.get_running_loop().create_task(self._watch(), name="ray-health")

    async def _reachable(self) -> None:
        """A HOST:PORT the driver cannot open a connection to is an error now: ray.init would wait
        for it without end, blocking the run (and its signal handling) meanwhile."""
        address = self.cfg.address
        if address is None or address == "auto":
            return
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), 10.0)
        except (TimeoutError, OSError) as exc:
            why = "no answer within 10 s" if isinstance(exc, asyncio.TimeoutError) else (exc.strerror or str(exc))
            raise EvaluatorSetupError(f"cannot reach the Ray cluster at {address} ({why}); start it (`ray start "
                                      "--head`) or fix [evaluator] address / --ray-address") from None
        writer.close()

    def _init_args(self) -> dict:
        args: dict = {"log_to_driver": False, "logging_level": logging.WARNING, "namespace": "evotui"}
        if self.cfg.address is None:
            args.update(include_dashboard=False, num_cpus=self.cfg.local_num_cpus, _node_ip_address="127.0.0.1")
        else:
            # The nodes may not have evotui installed: the engine package travels with the job.
            args.update(address=self.cfg.address, runtime_env={"py_modules": [ENGINE_DIR]})
        return args

    # -- capacity and health -------------------------------------------------------------------------
    def _needs(self) -> dict[str, float]:
        c = self.cfg
        return {k: v for k, v in (("CPU", c.num_cpus), ("GPU", c.num_gpus),
                                  ("memory", (c.memory_mb or 0) * 1024 * 1024)) if v}

    def capacity(self, total: dict, available: dict) -> int:
        return capacity(self._needs(), total, available, self.running, self.cfg.max_in_flight, self.where)

    async def _refresh(self, first: bool = False) -> None:
        """One health probe: the cluster's resources within lost_after_s, or the cluster is lost."""
        ray = self._ray
        if self._probing is None or self._probing.done():
            self._probing = _in_thread(lambda: (ray.cluster_resources(), ray.available_resources()))
        try:
            total, available = await asyncio.wait_for(asyncio.shield(self._probing), self.cfg.lost_after_s)
        except TimeoutError:
            return await self._mark_lost(f"no answer within {self.cfg.lost_after_s:g} s")
        except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is the loss it reports
            return await self._mark_lost(_first_line(exc))
        try:
            limit = self.capacity(total, available)
        except EvaluatorSetupError as exc:
            if first:  # the cluster never could run one: a setting to change, not a loss
                raise
            return await self._mark_lost(str(exc))  # it shrank below one evaluation (nodes died)
        async with self._cond:
            self.limit = limit
            self._cond.notify_all()

    async def _mark_lost(self, why: str) -> None:
        async with self._cond:
            if not self.lost:
                self.lost = (f"the Ray cluster at {self.where} is lost ({why}); the run stopped with its work saved: "
                             "start the cluster again, then resume the run")
            self._cond.notify_all()

    async def _watch(self) -> None:
        every = min(5.0, self.cfg.lost_after_s / 3)
        while not self.lost:
            await asyncio.sleep(every)
            await self._refresh()

    # -- evaluations --------------------------------------------------------------------------------
    async def _bundle(self, folder: Path) -> tuple[str, Any]:
        if folder not in self._bundles:
            bundle = await asyncio.to_thread(pack, folder)
            self._bundles[folder] = (bundle.digest, self._ray.put(bundle))
        return self._bundles[folder]

    async def _take_slot(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: bool(self.lost) or self.running < self.limit)
            if self.lost:
                raise EvaluatorLost(self.lost)
            self.running += 1

    async def _give_slot(self) -> None:
        async with self._cond:
            self.running -= 1
            self._cond.notify_all()

    async def _outcome(self, ref: Any) -> dict:
        """The task's result, or EvaluatorLost as soon as the cluster is declared lost."""
        fut = asyncio.wrap_future(ref.future())
        lost = asyncio.ensure_future(self._until_lost())
        try:
            await asyncio.wait({fut, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            fut.add_done_callback(_consume)  # Ray settles it with TaskCancelledError: nobody waits for that
            self._cancel(ref)
            raise
        finally:
            lost.cancel()
        if not fut.done():
            fut.cancel()
            raise EvaluatorLost(self.lost)
        return fut.result()

    async def _until_lost(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: bool(self.lost))

    def _cancel(self, ref: Any) -> None:
        try:
            self._ray.cancel(ref)
        except Exception as exc:  # noqa: BLE001 - best effort: the sandbox's wall clock bounds the task
            logging.getLogger(__name__).debug("ray.cancel failed: %s", exc)

    async def evaluate(self, evaluator: Path, program_text: str, *, mode: str = "openevolve",
                       cascade: bool = False, thresholds: list[float] | None = None,
                       limits: SandboxLimits | None = None, program_name: str = "program.py",
                       on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        """on_stage is never called: a Ray task's result comes back whole (speculation on programs
        is refused with this backend, engine/capabilities/program_speculation.py)."""
        await self.start()
        evaluator = Path(evaluator).resolve()
        try:
            digest, bundle_ref = await self._bundle(evaluator.parent)
        except ShippingError as exc:
            raise EvaluatorSetupError(str(exc)) from None
        req = EvalRequest(evaluator.name, program_text, mode, cascade, tuple(thresholds or ()), limits or self.limits,
                          program_name, self.secret_vars, self.cfg.scratch_root)
        opts: dict = {"num_cpus": self.cfg.num_cpus, "num_gpus": self.cfg.num_gpus, "max_retries": 0,
                      "retry_exceptions": False}
        if self.cfg.memory_mb:
            opts["memory"] = self.cfg.memory_mb * 1024 * 1024
        t0 = time.monotonic()
        deaths: list[str] = []
        await self._take_slot()
        try:
            while True:
                ref = self._task.options(**opts).remote(digest, [bundle_ref], req)
                try:
                    out = await self._outcome(ref)
                except self._ray.exceptions.RayTaskError as exc:  # our worker code raised: no retry
                    return EvalResult(ok=False, reason=f"the Ray task failed: {_first_line(exc.cause or exc)}",
                                      duration_s=time.monotonic() - t0)
                except self._ray.exceptions.RayError as exc:  # the worker, its node or an object died
                    deaths.append(_first_line(exc))
                    await self._refresh()
                    if self.lost:
                        raise EvaluatorLost(self.lost) from None
                    if len(deaths) <= self.cfg.max_retries:
                        self.retried += 1
                        continue
                    self.gave_up += 1
                    return EvalResult(ok=False, duration_s=time.monotonic() - t0,
                                      reason=f"the Ray worker running it died {len(deaths)} times; gave up after "
                                             f"{self.cfg.max_retries} retries (last: {deaths[-1]})")
                res = result_from(out["result"])
                self.nodes.add(str(out.get("node")))
                self.isolation = str(out.get("isolation") or self.isolation)
                if deaths:
                    res.warnings.append(f"ran {len(deaths) + 1} times: the worker died before ({deaths[-1]})")
                return res
        finally:
            self.completed += 1
            await self._give_slot()

    # -- figures and shutdown ---------------------------------------------------------------------
    @property
    def note(self) -> str:
        return f"Ray at {self.where}" + (f"; workers: {self.isolation}" if self.isolation else "")

    def figures(self) -> dict:
        return {"backend": self.backend, "address": self.cfg.address or "local", "sandbox": self.note,
                "limit": self.limit, "running": self.running, "completed": self.completed,
                "retried": self.retried, "gave_up": self.gave_up, "nodes": len(self.nodes), "lost": self.lost}

    async def aclose(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            await asyncio.gather(self._probe_task, return_exceptions=True)
        if self._ray is None or not self._owns_connection or self.lost:
            return  # a lost cluster cannot be told goodbye (the call would hang)
        ray = self._ray
        try:
            await asyncio.wait_for(_in_thread(ray.shutdown), 30.0)
        except TimeoutError:
            logging.getLogger(__name__).warning("ray.shutdown() did not finish within 30 s")
            return  # Ray's threads may still print and authenticate: leave its state as it is
        except Exception as exc:  # noqa: BLE001 - the run's end goes on (store, lease) whatever Ray says
            logging.getLogger(__name__).warning("ray.shutdown() failed: %s", _first_line(exc))
        if self._session is not None:
            self._session.close()
