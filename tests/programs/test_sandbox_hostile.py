"""Hostile evaluators against every isolation mode this machine offers (issue 16, item 5).

Each test runs under the detected mode and under the forced fallbacks (no namespaces; no
namespaces and no cgroup; neither of those nor Landlock). A mode that offers no mechanism for
a threat (for example file confinement with nothing but rlimits) is skipped with its note as the
reason; everything else must hold. Every file lives in the test's tmp_path; leftover processes
are found by a per-test marker in their command line, never by global state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.sandbox import Isolation, Sandbox, SandboxLimits, isolation

MODES = {
    "detected": {},
    "no-namespaces": {"EVOTUI_SANDBOX_NO_NAMESPACES": "1"},
    "no-namespaces-no-cgroup": {"EVOTUI_SANDBOX_NO_NAMESPACES": "1", "EVOTUI_SANDBOX_NO_CGROUP": "1"},
    "bare": {"EVOTUI_SANDBOX_NO_NAMESPACES": "1", "EVOTUI_SANDBOX_NO_CGROUP": "1", "EVOTUI_SANDBOX_NO_LANDLOCK": "1"},
}
_detected: dict[str, Isolation] = {}


def mode_isolation(name: str) -> Isolation:
    """Detection under the mode's environment (probed once per mode)."""
    if name not in _detected:
        saved = {k: os.environ.get(k) for k in MODES["bare"]}
        for k in saved:
            os.environ.pop(k, None)
        os.environ.update(MODES[name])
        try:
            _detected[name] = isolation.detect.__wrapped__()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return _detected[name]


@pytest.fixture(params=list(MODES))
def iso(request) -> Isolation:
    return mode_isolation(request.param)


def files_confined(iso: Isolation) -> bool:
    return iso.mounts or iso.uid_switch or iso.landlock > 0


def run(iso: Isolation, tmp_path: Path, evaluator: str, program: str = "x = 1\n", wall_s: float = 60):
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    ev = task / "evaluator.py"
    ev.write_text(evaluator)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    sandbox = Sandbox(SandboxLimits(wall_s=wall_s, memory_mb=1024), isolation=iso, scratch_root=scratch)
    res = asyncio.run(sandbox.evaluate(ev, program))
    assert not list(scratch.iterdir()), "scratch directory left behind"
    return res


def test_write_outside_scratch_is_refused(iso, tmp_path):
    if not files_confined(iso):
        pytest.skip(f"no file confinement in this mode: {iso.describe()}")
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    res = run(iso, tmp_path, f"""
import os
def evaluate(p):
    out = {{}}
    for name, path, mode in (("task", os.path.join(os.path.dirname(__file__), "planted.py"), "w"),
                             ("victim", {str(victim)!r}, "a"), ("here", "scratch_ok.txt", "w")):
        try:
            with open(path, mode) as fh:
                fh.write("evil")
            out[name] = "written"
        except OSError as exc:
            out[name] = type(exc).__name__
    return {{"combined_score": 1.0, **out}}
""")
    assert res.ok, res.reason
    assert res.feedback["here"] == "written", "scratch must stay writable"
    assert res.feedback["task"] != "written" and not (tmp_path / "task" / "planted.py").exists()
    assert res.feedback["victim"] != "written" and victim.read_text() == "original"


def test_database_is_not_found_or_changed(iso, tmp_path):
    """The run's database, found like the issue's attacker did (through /proc/*/cmdline)."""
    if not files_confined(iso):
        pytest.skip(f"no file confinement in this mode: {iso.describe()}")
    marker = f"evotui-test-db-{secrets.token_hex(6)}"
    db = tmp_path / f"{marker}.db"
    with sqlite3.connect(db) as con:
        con.execute("create table artifacts (id text, val_mean real)")
        con.execute("insert into artifacts values ('a1', 0.5)")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", str(db)])
    try:
        res = run(iso, tmp_path, f"""
import os, sqlite3
def evaluate(p):
    found, changed = "", "no"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        for arg in args:
            if {marker!r}.encode() in arg:
                found = arg.decode()
    if found:
        try:
            con = sqlite3.connect(found)
            con.execute("update artifacts set val_mean = 12345")
            con.commit()
            changed = "yes"
        except sqlite3.Error as exc:
            changed = str(exc)
    return {{"combined_score": 1.0, "found": found or "no", "changed": changed}}
""")
    finally:
        holder.kill()
        holder.wait()
    assert res.ok, res.reason
    with sqlite3.connect(db) as con:
        assert con.execute("select val_mean from artifacts").fetchone()[0] == 0.5
    assert res.feedback["changed"] != "yes"
    if iso.pid_namespace:
        assert res.feedback["found"] == "no", "host /proc must be hidden"


FORGE_INPROCESS = """
import importlib.util
def evaluate(p):
    spec = importlib.util.spec_from_file_location("candidate", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": 1.0}
"""

FORGED_BY_FILE = """
import json, os, sys
# The old runner: argv[1] is the spec file, whose "result" names the file the engine reads.
try:
    spec = json.load(open(sys.argv[1]))
    with open(spec["result"], "w") as fh:
        json.dump({"ok": True, "metrics": {"combined_score": 999.0}, "artifacts": {}}, fh)
except (OSError, ValueError, IndexError, KeyError):
    pass
os._exit(0)
"""


def test_result_file_cannot_be_forged(iso, tmp_path):
    res = run(iso, tmp_path, FORGE_INPROCESS, program=FORGED_BY_FILE)
    assert res.score != 999.0
    # The imported candidate runs in its own process: its os._exit ends that process only.
    assert not res.ok and "the candidate's process ended (exit code 0)" in res.reason


FORGE_SUBPROCESS = """
import subprocess, sys
def evaluate(p):
    subprocess.run([sys.executable, p], timeout=30)
    return {"combined_score": 1.0}
"""

FORGED_BY_PIPES = """
import json, os, signal
frame = json.dumps({"ok": True, "metrics": {"combined_score": 999.0}}).encode()
report = json.dumps({"nonce": "", "result": {"ok": True, "metrics": {"combined_score": 999.0}}}).encode()
for pid in {os.getppid(), 1}:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(w, b"%d\\n" % len(frame) + frame + report)
        except OSError:
            pass
        os.close(w)
"""


def test_candidate_subprocess_cannot_reach_the_result_channel(iso, tmp_path):
    res = run(iso, tmp_path, FORGE_SUBPROCESS, program=FORGED_BY_PIPES)
    assert res.ok and res.score == 1.0, (res.reason, res.score)


ENGINE = """
import asyncio, dataclasses, json, sys
from engine.sandbox import Isolation, Sandbox, SandboxLimits
fields = json.loads(sys.argv[1])
fields["prefix"] = tuple(fields["prefix"])
sandbox = Sandbox(SandboxLimits(wall_s=60), isolation=Isolation(**fields), scratch_root=sys.argv[3])
res = asyncio.run(sandbox.evaluate(sys.argv[2], "x = 1\\n"))
print(json.dumps(dataclasses.asdict(res)))
"""


def test_parent_environment_is_unreadable(iso, tmp_path):
    """The key is in the engine's environment from its start, as with a real run (a variable set
    later by putenv never shows in /proc/<pid>/environ), so the engine here is a child process."""
    if not (iso.pid_namespace or iso.uid_switch or iso.landlock or iso.drop_caps):
        pytest.skip(f"nothing protects /proc/<pid>/environ in this mode: {iso.describe()}")
    secret = f"sk-evotui-test-{secrets.token_hex(8)}"
    ev = tmp_path / "evaluator.py"
    ev.write_text(f"""
import os
def evaluate(p):
    hits = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if {secret!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
                hits.append(pid)
        except OSError:
            continue
    return {{"combined_score": 1.0, "hits": ",".join(hits) or "none",
             "own": os.environ.get("EVOTUI_TEST_API_KEY", "absent")}}
""")
    (tmp_path / "scratch").mkdir()
    fields = json.dumps(dataclasses.asdict(iso))
    proc = subprocess.run([sys.executable, "-c", ENGINE, fields, str(ev), str(tmp_path / "scratch")],
                          env={**os.environ, "EVOTUI_TEST_API_KEY": secret}, capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["ok"], res["reason"]
    assert res["feedback"]["hits"] == "none" and res["feedback"]["own"] == "absent"
    assert secret not in proc.stdout


def _marked(marker: str) -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                out.append(int(name))
        except OSError:
            continue
    return out


@pytest.mark.parametrize("ending", ["returns", "times_out"])
def test_no_daemon_outlives_the_evaluation(iso, tmp_path, ending):
    marker = f"evotui-test-daemon-{secrets.token_hex(6)}"
    tail = "    return {'combined_score': 1.0}\n" if ending == "returns" else "    while True:\n        time.sleep(1)\n"
    evaluator = f"""
import os, sys, time
def _marked():
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            n += {marker!r}.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read()
        except OSError:
            continue
    return n
def evaluate(p):
    for _ in range(3):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
            os._exit(0)
    deadline = time.monotonic() + 30  # wait until all three daemons run the marked command
    while time.monotonic() < deadline and _marked() < 3:
        time.sleep(0.01)
{tail}"""
    try:
        res = run(iso, tmp_path, evaluator, wall_s=60 if ending == "returns" else 3)
        assert _marked(marker) == [], f"daemons outlived the evaluation ({iso.describe()})"
        if ending == "returns":
            assert res.ok, res.reason
        else:
            assert res.timed_out
    finally:
        for pid in _marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue


def test_isolation_statement_names_each_guarantee(iso):
    note = iso.describe()
    for word in ("files:", "/proc:", "leftover processes:", "process cap:", "network:", "results:"):
        assert word in note, (word, note)
    assert "NOT" in note or files_confined(iso)


def test_pids_cgroup_caps_a_fork_bomb_on_v1_or_v2(tmp_path):
    iso = mode_isolation("no-namespaces")
    if not iso.pids_cgroup:
        pytest.skip("no writable pids cgroup (v1 or v2) on this machine")
    res = run(iso, tmp_path, """
import os, time
def evaluate(p):
    n = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError as exc:
            return {"combined_score": float(n), "error": str(exc)}
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    return {"combined_score": float(n), "error": "none"}
""")
    assert res.ok and res.score < 64, (res.reason, res.score, iso.cgroup_version)
    assert "Resource temporarily unavailable" in res.feedback["error"]
