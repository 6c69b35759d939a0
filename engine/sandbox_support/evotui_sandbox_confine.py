"""OS confinement used by the sandbox runner (stdlib + ctypes only; never imported by the engine).

Four mechanisms, each optional, chosen by the engine (see engine/sandbox/isolation.py):
* mounts (supervisor, inside new user+mount+PID+net namespaces): every mount is remounted
  read-only except the scratch directory, a fresh /proc shows only the evaluation's own
  processes and /dev/shm is a private tmpfs;
* uid (worker, when the engine runs as root without namespaces): the evaluation runs as an
  unprivileged uid of its own, so root-owned files and other users' /proc entries are out of reach;
* capabilities are dropped (bounding set too, so exec'ing a program as uid 0 gains none back)
  and no_new_privs is set (setuid binaries give nothing);
* Landlock (any mode, where the kernel has it): writes only beneath scratch and /dev/shm, reads
  only beneath the paths the engine lists (system, interpreter, task folder, declared), no TCP,
  no ptrace or /proc/<pid>/environ access and no signals to processes outside the evaluation.
"""

import ctypes
import errno
import os
import signal
import time

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs f_flag bits that map onto mount flags (ST_RELATIME is 4096, MS_RELATIME is 1<<21).
_ST_TO_MS = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
             (2048, MS_NODIRATIME), (4096, MS_RELATIME))


class ConfineError(RuntimeError):
    """A confinement step failed: the evaluation must not run without it."""


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(err)} (errno {err})")


def prctl(option, arg2=0, what=None):
    _check(_libc.prctl(option, ctypes.c_ulong(arg2), 0, 0, 0), what or f"prctl({option})")


def mount(source, target, fstype, flags, data=None, what=None):
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           what or f"mount {target}")


# -- mount namespace (supervisor, before the worker exists) -----------------------------------

def _unescape(path):
    # mountinfo escapes space, tab, newline and backslash as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path


def mount_points():
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = [_unescape(line.split()[4]) for line in fh if line.strip()]
    return list(dict.fromkeys(points))


def _flags_of(path):
    st = os.statvfs(path).f_flag
    return sum(ms for bit, ms in _ST_TO_MS if st & bit)


def readonly_except(scratch):
    """Remount every mount read-only except a writable bind of scratch; fresh /proc; private /dev/shm.
    Runs as uid 0 of a new user namespace that owns new mount and PID namespaces."""
    scratch = os.path.realpath(scratch)
    mount(None, "/", None, MS_REC | MS_PRIVATE, what="make / private")
    mount(scratch, scratch, None, MS_BIND | MS_REC, what=f"bind scratch {scratch}")
    for point in mount_points():
        if point == scratch or point.startswith(scratch + "/") or point == "/proc" or point.startswith("/proc/"):
            continue
        try:
            flags = _flags_of(point)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR):
                continue  # hidden under another mount: not reachable by path, so not writable either
            raise
        if flags & MS_RDONLY:
            continue
        # The locked flags (nosuid, nodev, noexec, atime) must be kept, or the kernel refuses.
        mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, what=f"remount {point} read-only")
    # The new PID namespace's own /proc: host processes (and their cmdline/environ) are invisible.
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, what="mount a fresh /proc")
    if os.path.isdir("/dev/shm"):
        # multiprocessing needs a writable /dev/shm; a private one shares nothing with the host.
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777", what="mount /dev/shm")


# -- privileges (worker) -----------------------------------------------------------------------

def switch_uid(uid):
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise ConfineError(f"could not switch to uid {uid}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities():
    """Empty bounding, ambient, effective, permitted and inheritable sets (uid 0 stays powerless)."""
    last = 63
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except OSError:
        pass  # no /proc here: try every possible cap; unknown ones return EINVAL below
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise ConfineError(f"cannot drop capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}")
    _libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset (drop all capabilities)")


# -- Landlock ----------------------------------------------------------------------------------

_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
_FS_WRITES_V1 = 2 | (0x1FF0)  # write_file, remove_dir/file, make_char/dir/reg/sock/fifo/block/sym
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_TCP = 3  # bind_tcp | connect_tcp
SCOPES = 3  # abstract unix sockets | signals
_DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def landlock(writable, abi, readable=None):
    """Allow writes only beneath the writable directories and, when readable is a list, reads and
    execution only beneath those and the writable ones; deny TCP (ABI >= 4) and signals or abstract
    sockets to processes outside the evaluation (ABI >= 6). readable=None leaves reads alone."""
    reads = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR if readable is not None else 0
    fs = _FS_WRITES_V1 | reads | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, NET_TCP if abi >= 4 else 0, SCOPES if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = _libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise ConfineError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        file_rights = fs & (FS_WRITE_FILE | FS_TRUNCATE | FS_READ_FILE | FS_EXECUTE)
        rules = [(p, fs) for p in [*writable, *_DEV_FILES]] + [(p, reads) for p in readable or ()]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent (e.g. no /dev/tty): nothing to allow
            try:
                rule = _PathBeneath(rights if os.path.isdir(path) else rights & file_rights, fd)
                if _libc.syscall(_SYS_ADD, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule),
                                 ctypes.c_uint32(0)) != 0:
                    raise ConfineError(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
        if _libc.syscall(_SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise ConfineError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


# -- process tracking (supervisor) -------------------------------------------------------------

def _parents():
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # exited while we scanned
        out[int(name)] = int(stat.rsplit(b")", 1)[1].split()[1])
    return out


def _uid_members(uid):
    # The real uid from status: /proc/<pid> of a non-dumpable process is owned by root.
    out, want = [], f"Uid:\t{uid}\t".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                if want in fh.read():
                    out.append(int(name))
        except OSError:
            continue  # exited while we scanned
    return out


def descendants(root):
    parents = _parents()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def kill_all(uid=None, timeout=5.0):
    """SIGKILL every descendant (and every process of uid) until none is left; returns how many
    were killed. As a child subreaper (or PID 1) every orphan of the evaluation is re-parented
    to us, so "no child left" means "no process of the evaluation left"."""
    me, killed, deadline = os.getpid(), set(), time.monotonic() + timeout
    while True:
        targets = descendants(me) | (set(_uid_members(uid)) if uid is not None else set())
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                continue
        children = True
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children = False
                break
            if pid == 0:
                break
        if not children and not targets:
            return len(killed)
        if time.monotonic() > deadline:
            raise ConfineError(f"processes of the evaluation survive SIGKILL after {timeout:g} s: {sorted(targets)[:10]}")
        time.sleep(0.005)
