"""The wire between an evaluator process and its candidate process (stdlib only).

Messages are length-prefixed pickles over a Unix socket. What the candidate process sends is
untrusted: the evaluator side unpickles it with `SafeUnpickler`, which builds plain data only
(numbers, strings, containers, numpy arrays and scalars); any other object the candidate returns
stays in the candidate process and travels as a handle (pickle's persistent ids), which the
evaluator side turns into a proxy. The same policy (`allowed_global`) guards every pickle an
evaluator process loads from a place the candidate could have written (see the guard).
"""

import builtins
import io
import os
import pickle
import struct
import types

PROTOCOL = 4
"""No out-of-band buffers (protocol 5): every byte travels in the message."""
MAX_MESSAGE = 1 << 30

_BUILTIN_DATA = {"complex", "set", "frozenset", "bytearray", "bytes", "slice", "range", "list", "dict", "tuple",
                 "int", "float", "str", "bool", "object"}
_SAFE_GLOBALS = {
    ("copyreg", "_reconstructor"),
    ("collections", "OrderedDict"), ("collections", "deque"), ("collections", "Counter"),
    ("datetime", "date"), ("datetime", "time"), ("datetime", "datetime"), ("datetime", "timedelta"),
    ("datetime", "timezone"), ("fractions", "Fraction"), ("decimal", "Decimal"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
}


def allowed_global(module, name, trusted_dirs=()):
    """May an untrusted pickle name this global? Data types only (their constructors build values and
    run no code of the pickle's choosing); exception classes of builtins; classes defined in a
    module under trusted_dirs (the task folder, which evaluated code cannot write)."""
    if module == "builtins":
        obj = getattr(builtins, name, None)
        return name in _BUILTIN_DATA or (isinstance(obj, type) and issubclass(obj, BaseException))
    if (module, name) in _SAFE_GLOBALS or (module.startswith("numpy") and name.endswith("DType")):
        return True
    mod = __import__("sys").modules.get(module)
    where = getattr(mod, "__file__", None)
    if not where or not trusted_dirs:
        return False
    where = os.path.realpath(where)
    return isinstance(getattr(mod, name, None), type) and any(where.startswith(d + os.sep) for d in trusted_dirs)


class RefusedGlobal(pickle.UnpicklingError):
    pass


def refusal(module, name):
    return RefusedGlobal(
        f"evotui sandbox: refused to unpickle {module}.{name} in the evaluator's process: this data may come "
        "from the candidate, and unpickling it could run the candidate's code here; return plain data "
        "(numbers, strings, lists, dicts, numpy arrays) from the candidate instead")


class SafeUnpickler(pickle._Unpickler):
    """Pure-Python unpickler (find_class and persistent_load are honoured on every opcode path)."""

    def __init__(self, file, *, trusted_dirs=(), persistent_load=None, **kw):
        super().__init__(file, **kw)
        self._trusted = tuple(trusted_dirs)
        self._pload = persistent_load

    def find_class(self, module, name):
        if not allowed_global(module, name, self._trusted):
            raise refusal(module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if self._pload is None:
            raise pickle.UnpicklingError("unexpected persistent id in untrusted data")
        return self._pload(pid)


def is_plain(obj, trusted_dirs=()):
    """Sent by value from the candidate process; anything else becomes a handle. Instances of the
    task folder's own classes (an Enum of moves, a result record) go by value too: the other side
    rebuilds them with its own copy of the class."""
    kind = type(obj)
    if trusted_dirs and allowed_global(getattr(kind, "__module__", "") or "", kind.__qualname__, trusted_dirs):
        return True
    if kind in (type(None), bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
                range, slice):
        return True
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        # Globals the other side accepts (numpy's reconstructors, builtin types) go by reference.
        return allowed_global(getattr(obj, "__module__", "") or "", getattr(obj, "__qualname__", ""), trusted_dirs)
    np = __import__("sys").modules.get("numpy")
    if np is None:
        return False
    if kind is np.ndarray:
        return obj.dtype != object
    return isinstance(obj, (np.generic, np.dtype))


def send(sock, obj, persistent_id=None):
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=PROTOCOL)
    if persistent_id is not None:
        pickler.persistent_id = persistent_id
    pickler.dump(obj)
    data = buf.getvalue()
    sock.sendall(struct.pack("!Q", len(data)) + data)


def recv_bytes(sock):
    head = _exact(sock, 8)
    (size,) = struct.unpack("!Q", head)
    if size > MAX_MESSAGE:
        raise ConnectionError(f"message of {size} bytes from the other side is over the {MAX_MESSAGE} limit")
    return _exact(sock, size)


def _exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        buf += chunk
    return bytes(buf)
