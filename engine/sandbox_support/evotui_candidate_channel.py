"""The evaluator's side of the candidate's process: one Channel per load of the candidate, and
the proxies (RemoteObject, RemoteCallable) through which the evaluator uses what lives there.
Part of evotui_candidate_guard.py (see there); stdlib only, runs inside the sandbox."""

import builtins
import io
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading

import evotui_candidate_wire as wire

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "evotui_candidate_host.py")


class CandidateError(Exception):
    """An exception of the candidate's own type, raised in its process."""


class Channel:
    """One load of the candidate = one process, as one import is one execution of its code."""

    def __init__(self, guard, name):
        self.guard, self.name = guard, name
        self.lock = threading.Lock()
        self.released = []
        self.broken = ""
        self.generation, self.translate = 0, {}
        self._start()

    def _start(self):
        self.pid = os.getpid()
        own = tempfile.mkdtemp(prefix="candidate-", dir=self.guard.scratch or None)
        mine, theirs = socket.socketpair()
        env = dict(os.environ, EVOTUI_CANDIDATE_DIR=own, EVOTUI_CANDIDATE_PARENT=str(os.getpid()),
                   EVOTUI_CANDIDATE_HOST="1", TMPDIR=own, HOME=own)
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-B", HOST, str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = mine

    def load(self):
        values = self.request(("load", self.name, self.guard.path, os.getcwd(), list(sys.argv),
                               [p for p in sys.path if isinstance(p, str)]))
        self.names = {k: v._id for k, v in values.items() if isinstance(v, RemoteObject)}
        return values

    def request(self, message):
        if self.pid != os.getpid():
            self._after_fork()
        with self.lock:
            if self.broken:
                raise RuntimeError(self.broken)
            if self.released:
                release, self.released = ("release", self.released), []
                self._exchange(release)
            raw = self._exchange(message)
        kind, *rest = wire.SafeUnpickler(io.BytesIO(raw), trusted_dirs=self.guard.trusted,
                                         persistent_load=self._proxy).load()
        if kind == "ok":
            return rest[0]
        if kind == "exit":
            raise SystemExit(rest[0])
        raise _rebuild(*rest)

    def _exchange(self, message):
        try:
            wire.send(self.sock, message, persistent_id=self._handle_of)
            return wire.recv_bytes(self.sock)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            if isinstance(exc, AttributeError) and "pickle" not in str(exc):
                raise
            raise TypeError(f"cannot pass this value to the candidate's process: {exc}") from None
        except BaseException as exc:
            # Interrupted (a timeout alarm) or the process died: its answer can no longer be matched.
            try:
                code = self.proc.wait(1) if isinstance(exc, ConnectionError) else self.proc.poll()
            except subprocess.TimeoutExpired:
                code = None  # still running: it broke the protocol, it did not end
            self.kill()
            if not isinstance(exc, ConnectionError):
                self.broken = f"the candidate's process was stopped after an interrupted call ({type(exc).__name__})"
                raise
            self.broken = (f"the candidate's process ended (exit code {code})" if code is not None
                           else f"the candidate's process broke the connection ({exc})")
            raise RuntimeError(self.broken) from None

    def _after_fork(self):
        """A forked evaluator process gets a candidate process of its own, the module loaded again;
        handles to module-level objects are mapped onto the new process's, others are void."""
        old = getattr(self, "names", {})
        self.lock, self.released, self.broken = threading.Lock(), [], ""
        self.generation += 1
        self.sock.close()  # this process's copy of the parent's connection (the parent keeps its own)
        self._start()
        raw = self._exchange(("load", self.name, self.guard.path, os.getcwd(), list(sys.argv), list(sys.path)))
        kind, *rest = wire.SafeUnpickler(io.BytesIO(raw), trusted_dirs=self.guard.trusted, persistent_load=_Ref).load()
        fresh = rest[0] if kind == "ok" else {}
        self.translate = {old[k]: v.hid for k, v in fresh.items() if k in old and isinstance(v, _Ref)}

    def _handle_of(self, obj):
        if isinstance(obj, RemoteObject):
            if obj._ch is not self:
                raise pickle.PicklingError("an object of another load of the candidate")
            return ("h", obj._ref())
        return None

    def _proxy(self, pid):
        _, hid, is_callable, name, signature = pid
        return (RemoteCallable if is_callable else RemoteObject)(self, hid, name, signature)

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass  # already gone, or the sandbox's supervisor reaps it at the end
        self.sock.close()


class _Ref:
    def __init__(self, pid):
        self.hid = pid[1]


def _rebuild(module, name, message, text):
    cls = getattr(builtins, name, None) if module == "builtins" else None
    exc = None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(message)
        except TypeError:
            exc = None  # an exception type that needs more arguments
    exc = exc or CandidateError(f"{name}: {message}")
    exc.add_note("raised in the candidate's process:\n" + text)
    return exc


class RemoteObject:
    """An object that lives in the candidate's process."""

    __slots__ = ("_ch", "_id", "_name", "_sig", "_gen", "__weakref__")

    def __init__(self, channel, hid, name, signature):
        for key, value in (("_ch", channel), ("_id", hid), ("_name", name), ("_sig", signature),
                           ("_gen", channel.generation)):
            object.__setattr__(self, key, value)

    def _ref(self):
        if self._gen == self._ch.generation:
            return self._id
        if self._id in self._ch.translate:
            return self._ch.translate[self._id]
        raise RuntimeError(f"{self._name} belonged to the candidate's process of the parent of this forked process")

    def _ask(self, *message):
        return self._ch.request((message[0], self._ref(), *message[1:]))

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocols (__array_interface__, ...) are not forwarded
        return self._ask("getattr", name)

    def __setattr__(self, name, value):
        self._ask("setattr", name, value)

    def __del__(self):
        try:
            if self._id and self._gen == self._ch.generation and self._ch.pid == os.getpid():
                self._ch.released.append(self._id)
        except AttributeError:
            pass  # half-built

    def __repr__(self):
        try:
            return self._ask("op", "repr", ())
        except Exception:
            return f"<{self._name} in the candidate's process>"

    def __str__(self):
        return self._ask("op", "str", ())

    def __len__(self):
        return self._ask("op", "len", ())

    def __bool__(self):
        return self._ask("op", "bool", ())

    def __float__(self):
        return float(self._ask("op", "float", ()))

    def __int__(self):
        return int(self._ask("op", "int", ()))

    def __index__(self):
        return int(self._ask("op", "index", ()))

    def __getitem__(self, key):
        return self._ask("op", "getitem", (key,))

    def __setitem__(self, key, value):
        self._ask("op", "setitem", (key, value))

    def __contains__(self, key):
        return self._ask("op", "contains", (key,))

    def __iter__(self):
        return self._ask("iter")

    def __next__(self):
        answer = self._ask("next")
        if answer[0] == "stop":
            raise StopIteration
        return answer[1]

    def __reduce__(self):
        name = next((k for k, v in getattr(self._ch, "names", {}).items() if v == self._id), None)
        if name is None:
            raise pickle.PicklingError(f"{self._name} lives in the candidate's process and cannot be copied")
        return sys.modules["evotui_candidate_guard"].remote_attribute, (self._ch.name, name)


class RemoteCallable(RemoteObject):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._ask("call", args, kwargs)

    @property
    def __name__(self):
        return self._name.rsplit(".", 1)[-1]

    @property
    def __signature__(self):
        import inspect

        if self._sig is None:
            raise ValueError(f"no signature for {self._name}")
        return inspect.Signature([inspect.Parameter(n, inspect._ParameterKind(k),
                                                    default=_Default if d else inspect.Parameter.empty)
                                  for n, k, d in self._sig])


class _DefaultType:
    def __repr__(self):
        return "<default in the candidate's process>"


_Default = _DefaultType()
