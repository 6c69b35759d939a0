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
import sys
import threading
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import evotui_candidate_wire as wire  # noqa: E402
from evotui_candidate_channel import CandidateError, Channel  # noqa: E402, F401 (CandidateError: for evaluators to catch)

PROXY_FILENAME = "<evotui: the candidate runs in its own process>"
_guard = None


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


_IPC = ("multiprocessing.", "concurrent.futures.")
"""Pickles between the evaluator's own processes (their pipes are not the candidate's to write)."""


def _patch_pickle():
    original_load, original_loads, original_unpickler = pickle.load, pickle.loads, pickle.Unpickler

    def trusted(file):
        name = getattr(file, "name", None)
        where = os.path.realpath(name) if isinstance(name, str) else ""
        return where and any(where.startswith(d + os.sep) for d in _guard.trusted)

    def from_ipc():
        return sys._getframe(2).f_globals.get("__name__", "").startswith(_IPC)

    def load(file, **kw):
        if trusted(file) or from_ipc():
            return original_load(file, **kw)
        return wire.SafeUnpickler(file, trusted_dirs=_guard.trusted, **kw).load()

    def loads(data, /, **kw):
        if from_ipc():
            return original_loads(data, **kw)
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
