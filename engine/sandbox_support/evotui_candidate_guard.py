"""Keeps the candidate's code out of the evaluator's process (stdlib only; runs inside the sandbox).

An evaluator that imports the candidate (importlib, runpy, exec of its text) would share its memory
with it, and the candidate could then change what evaluate() returns or write a forged result.
`install()` makes every such load run the candidate in a process of its own
(evotui_candidate_host.py) and gives the evaluator a module whose functions call into that
process; values come back as plain data, unpickled by a policy that runs no code of the
candidate's choosing. Three more rules hold in a guarded process:
* an audit hook (which cannot be removed) refuses to execute the candidate's code by any route the
  substitution does not cover, with an error that says so;
* pickles loaded from anywhere but the task folder go through the same data-only policy (an
  evaluator's helper subprocess may return results in a file the candidate could rewrite);
* the guard reaches the evaluator's Python subprocesses through sitecustomize (guard_site/), so
  a helper script that imports the candidate is guarded too.
What stays trusted: the evaluator file and its task folder (read-only to evaluated code), and
whatever the evaluator itself concludes from data the candidate returns.
"""

import builtins
import importlib.machinery
import io
import os
import pickle
import runpy
import socket
import subprocess
import sys
import tempfile
import threading
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import evotui_candidate_wire as wire  # noqa: E402

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "evotui_candidate_host.py")
PROXY_FILENAME = "<evotui: the candidate runs in its own process>"
ENV = ("EVOTUI_CANDIDATE", "EVOTUI_SANDBOX_SCRATCH", "EVOTUI_SANDBOX_LANDLOCK", "EVOTUI_SANDBOX_TRUSTED")
_guard = None


class CandidateError(Exception):
    """An exception of the candidate's own type, raised in its process."""


class Guard:
    def __init__(self, candidate, scratch, landlock, trusted_dirs):
        self.path = os.path.realpath(candidate)
        self.scratch = scratch
        self.landlock = int(landlock or 0)
        self.trusted = tuple(os.path.realpath(d) for d in trusted_dirs if d)
        with open(self.path, "rb") as fh:
            self.source = fh.read()
        try:
            self.code = _compile(self.source, self.path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            self.code = None  # it cannot run anywhere; loading it reports the error from its process
        self.proxy = _compile("__import__('sys').modules['evotui_candidate_guard'].fill(globals())\n",
                              PROXY_FILENAME, "exec", dont_inherit=True)
        self.channels = {}
        self.lock = threading.Lock()

    def is_candidate_file(self, filename):
        try:
            return bool(filename) and os.path.realpath(os.fsdecode(filename)) == self.path
        except (TypeError, ValueError):
            return False

    def is_candidate_text(self, source):
        if isinstance(source, str):
            source = source.encode("utf-8", "surrogatepass")
        return isinstance(source, (bytes, bytearray, memoryview)) and bytes(source) == self.source

    def env(self):
        return {"EVOTUI_CANDIDATE": self.path, "EVOTUI_SANDBOX_SCRATCH": self.scratch,
                "EVOTUI_SANDBOX_LANDLOCK": str(self.landlock), "EVOTUI_SANDBOX_TRUSTED": os.pathsep.join(self.trusted)}


# -- the candidate's process, seen from here -------------------------------------------------------

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
        self._start()
        raw = self._exchange(("load", self.name, self.guard.path, os.getcwd(), list(sys.argv), list(sys.path)))
        kind, *rest = wire.SafeUnpickler(io.BytesIO(raw), persistent_load=_Ref).load()
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
        return remote_attribute, (self._ch.name, name)


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


def remote_attribute(module_name, name):
    """What a pickled module-level function of the candidate becomes in another guarded process."""
    key = (os.getpid(), module_name)
    with _guard.lock:
        channel = _guard.channels.get(key)
        if channel is None:
            channel = _guard.channels[key] = Channel(_guard, module_name)
            channel.values = channel.load()
    return channel.values[name]


def fill(namespace):
    """The candidate module's body in this process: its names, from its own process."""
    channel = Channel(_guard, namespace.get("__name__") or "candidate")
    namespace.update(channel.load())


# -- the substitutions and the backstop ------------------------------------------------------------

_compile = builtins.compile
_exec = builtins.exec


def _guarded_compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kw):
    if mode == "exec" and not flags & 0x400 and _guard.is_candidate_text(source):  # 0x400: PyCF_ONLY_AST
        return _guard.proxy
    return _compile(source, filename, mode, flags, dont_inherit, optimize, **kw)


def _guarded_exec(source, globals=None, locals=None, /, **kw):
    if globals is None:
        caller = sys._getframe(1)
        globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
    if _guard.is_candidate_text(source):
        source = _guard.proxy
    return _exec(source, globals, locals, **kw)


def _patch_loaders():
    loader = importlib.machinery.SourceFileLoader
    original = loader.get_code

    def get_code(self, fullname):
        if _guard.is_candidate_file(self.get_filename(fullname)):
            return _guard.proxy
        return original(self, fullname)

    loader.get_code = get_code
    from_file = runpy._get_code_from_file

    def _get_code_from_file(run_name, fname):
        return (_guard.proxy, fname) if _guard.is_candidate_file(fname) else from_file(run_name, fname)

    runpy._get_code_from_file = _get_code_from_file


def _patch_pickle():
    original_load, original_unpickler = pickle.load, pickle.Unpickler

    def trusted(file):
        name = getattr(file, "name", None)
        where = os.path.realpath(name) if isinstance(name, str) else ""
        return where and any(where.startswith(d + os.sep) for d in _guard.trusted)

    def load(file, **kw):
        if trusted(file):
            return original_load(file, **kw)
        return wire.SafeUnpickler(file, trusted_dirs=_guard.trusted, **kw).load()

    def loads(data, /, **kw):
        return wire.SafeUnpickler(io.BytesIO(data), trusted_dirs=_guard.trusted, **kw).load()

    class Unpickler(original_unpickler):
        def find_class(self, module, name):
            if not (wire.allowed_global(module, name, _guard.trusted) or _is_guard_global(module, name)):
                raise wire.refusal(module, name)
            return super().find_class(module, name)

    pickle.load, pickle.loads, pickle.Unpickler = load, loads, Unpickler


def _is_guard_global(module, name):
    return module == "evotui_candidate_guard" and name == "remote_attribute"


def _audit(event, args):
    if event != "exec" or _guard is None or not args or not isinstance(args[0], types.CodeType):
        return
    code = args[0]
    if code.co_filename == PROXY_FILENAME:
        return
    if code.co_filename == _guard.path or (_guard.code is not None and code == _guard.code):
        raise RuntimeError("evotui sandbox: the evaluator tried to run the candidate's code inside its own "
                           "process by a route evotui cannot redirect; load it with importlib, runpy or "
                           "exec of its unmodified text (it then runs in a process of its own)")


def install(candidate, scratch, landlock=0, trusted_dirs=()):
    """Guard this process (idempotent) and pass the guard on to Python subprocesses."""
    global _guard
    if _guard is not None:
        return _guard
    _guard = Guard(candidate, scratch, landlock, trusted_dirs)
    sys.modules.setdefault("evotui_candidate_guard", sys.modules[__name__])
    _patch_loaders()
    _patch_pickle()
    builtins.compile, builtins.exec = _guarded_compile, _guarded_exec
    sys.addaudithook(_audit)
    os.environ.update(_guard.env())
    add_guard_site()
    return _guard


def add_guard_site():
    """Python subprocesses (not -I or -S) load guard_site/sitecustomize.py."""
    site_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_site")
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if site_dir not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([site_dir, *parts])


def install_from_env():
    """sitecustomize's entry: a Python subprocess of a guarded evaluator (not the candidate's own)."""
    if os.environ.get("EVOTUI_CANDIDATE_HOST") or not os.environ.get("EVOTUI_CANDIDATE"):
        return None
    trusted = [d for d in os.environ.get("EVOTUI_SANDBOX_TRUSTED", "").split(os.pathsep) if d]
    return install(os.environ["EVOTUI_CANDIDATE"], os.environ.get("EVOTUI_SANDBOX_SCRATCH", ""),
                   os.environ.get("EVOTUI_SANDBOX_LANDLOCK", "0"), trusted)
