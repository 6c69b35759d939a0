"""The candidate's own process: runs the evaluated program that an evaluator imported.

usage: python -I -B evotui_candidate_host.py SOCKET_FD

Started by evotui_candidate_guard.py when an evaluator process loads the candidate. It inherits
that process's confinement (rlimits, namespaces, Landlock, no_new_privs) and adds its own:
it dies with its parent, and where Landlock is available it may write only beneath its own
directory, so it cannot touch files the evaluator writes (results, temp files) nor the
evaluator's result channel, which it never holds. It loads the program as a module, then answers
the evaluator's requests (get an attribute, call, iterate, ...). Values that are plain data go
back by value; every other object stays here and is referred to by a handle.
"""

import ctypes
import importlib.util
import inspect
import os
import pickle
import socket
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out

import evotui_candidate_wire as wire  # noqa: E402

PR_SET_PDEATHSIG = 1


class Host:
    def __init__(self, sock):
        self.sock = sock
        self.objects = {}
        self.next_id = 1
        self.trusted = tuple(d for d in os.environ.get("EVOTUI_SANDBOX_TRUSTED", "").split(os.pathsep) if d)

    # -- handles ---------------------------------------------------------------------------------
    def handle(self, obj):
        if wire.is_plain(obj, self.trusted):
            return None
        hid = self.next_id
        self.next_id += 1
        self.objects[hid] = obj
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
        return ("h", hid, callable(obj), str(name), _signature(obj))

    def resolve(self, pid):
        return self.objects[pid[1]]

    def reply(self, obj):
        try:
            wire.send(self.sock, ("ok", obj), persistent_id=self.handle)
        except (pickle.PicklingError, TypeError, ValueError, RecursionError) as exc:
            self.fail(TypeError(f"the candidate's value could not be sent to the evaluator: {exc}"))

    def fail(self, exc):
        if isinstance(exc, SystemExit):
            wire.send(self.sock, ("exit", exc.code if isinstance(exc.code, (int, str, type(None))) else 1))
            return
        kind = type(exc)
        text = "".join(traceback.format_exception(kind, exc, exc.__traceback__))[-4000:]
        wire.send(self.sock, ("err", kind.__module__, kind.__name__, str(exc)[:4000], text))

    # -- requests --------------------------------------------------------------------------------
    def load(self, name, path, cwd, argv, path_list):
        os.chdir(cwd)
        sys.argv = list(argv)
        sys.path[:] = [p for p in path_list if isinstance(p, str)]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        self.objects[0] = module
        return {k: v for k, v in vars(module).items() if not (k.startswith("__") and k.endswith("__"))}

    def serve(self):
        while True:
            try:
                raw = wire.recv_bytes(self.sock)
            except ConnectionError:
                return
            unpickler = pickle.Unpickler(__import__("io").BytesIO(raw))
            unpickler.persistent_load = self.resolve
            request = unpickler.load()
            try:
                self.reply(self.answer(request))
            except BaseException as exc:  # the candidate's failure is the answer, whatever it is
                self.fail(exc)

    def answer(self, request):
        op = request[0]
        if op == "load":
            return self.load(*request[1:])
        if op == "release":
            for hid in request[1]:
                self.objects.pop(hid, None)
            return None
        target = self.objects[request[1]]
        if op == "call":
            return target(*request[2], **request[3])
        if op == "getattr":
            return getattr(target, request[2])
        if op == "setattr":
            return setattr(target, request[2], request[3])
        if op == "iter":
            return iter(target)
        if op == "next":
            try:
                return ("item", next(target))
            except StopIteration:
                return ("stop",)
        if op == "op":
            return _OPS[request[2]](target, *request[3])
        raise ValueError(f"unknown request {op!r}")


_OPS = {
    "len": len, "repr": repr, "str": str, "bool": bool, "float": float, "int": int, "index": lambda o: o.__index__(),
    "getitem": lambda o, k: o[k], "setitem": lambda o, k, v: o.__setitem__(k, v), "contains": lambda o, k: k in o,
}


def _signature(obj):
    """(name, kind, has_default) per parameter, so inspect.signature() works on the proxy."""
    if not callable(obj):
        return None
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return None
    return [(p.name, int(p.kind), p.default is not inspect.Parameter.empty) for p in params]


def confine(own_dir, abi):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL when the evaluator's process goes
    if str(os.getppid()) != os.environ.get("EVOTUI_CANDIDATE_PARENT"):
        os._exit(1)  # the parent died before the line above: nobody is left to answer
    if abi:
        import evotui_sandbox_confine as confine_mod

        writable = [own_dir] + (["/dev/shm"] if os.path.isdir("/dev/shm") else [])
        confine_mod.landlock(writable, abi)


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    own_dir = os.environ.get("EVOTUI_CANDIDATE_DIR", "")
    confine(own_dir, int(os.environ.get("EVOTUI_SANDBOX_LANDLOCK", "0") or 0) if own_dir else 0)
    if os.environ.get("EVOTUI_SANDBOX_NET_GUARD"):
        import evotui_sandbox_eval as ev

        ev.block_network()
    Host(sock).serve()
    os._exit(0)


if __name__ == "__main__":
    main()
