"""Attacks between runs and toward the host (issue 13, items 2 and 4-10), on both backends.

Each test is an attack that worked before the fix it names: a secret read from the caller's
session keyring, a key or message queue handed from one run to the next in the same slot,
unprivileged user namespaces and ptrace, sandbox cgroups outside the caller's, a mode-000
directory turning a wrong program into an `infra_error`, containers left behind at exit, and a
killed holder's slot left running. The sandboxes here have ONE slot/container, so consecutive
runs really share it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlvr.sandbox import Limits
from sandbox_support import CANARY, make_sandbox, one_slot, sandbox_processes  # noqa: F401


# Syscall numbers the attack programs use, per architecture (the host test machines are these).
SYSCALLS = textwrap.dedent('''
    import ctypes, json, os, platform
    NR = {"x86_64": dict(keyctl=250, add_key=248, request_key=249, unshare=272, clone=56,
                         clone3=435, ptrace=101, mount=165, bpf=321, perf_event_open=298,
                         kexec_load=246, init_module=175, finit_module=313, delete_module=176),
          "aarch64": dict(keyctl=219, add_key=217, request_key=218, unshare=97, clone=220,
                          clone3=435, ptrace=117, mount=40, bpf=280, perf_event_open=241,
                          kexec_load=104, init_module=105, finit_module=273,
                          delete_module=106)}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    L = ctypes.c_long
    def sc(name, *args):
        ctypes.set_errno(0)
        ret = libc.syscall(L(NR[name]), *args)
        return ret, ctypes.get_errno()
    def key_payload(key_id):
        buf = ctypes.create_string_buffer(512)
        n, _ = sc("keyctl", L(11), L(key_id), buf, L(512))      # KEYCTL_READ
        return buf.raw[:max(n, 0)].decode(errors="replace")
''')
KEY_SPEC = {"@s": -3, "@u": -4, "@us": -5}


def run(sb, code, **kw):
    res = sb.run(SYSCALLS + textwrap.dedent(code), **kw)
    assert res.status == "ok", (res.status, res.reason, res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- keyrings (4, 5)

PLANT_AND_ATTACK = textwrap.dedent('''
    import ctypes, json, sys
    from rlvr.sandbox import get_sandbox
    libc = ctypes.CDLL(None, use_errno=True)
    L = ctypes.c_long
    # before any thread exists: this process (and every launcher it starts) gets a session
    # keyring of its own holding a secret, as a user's login session would
    assert libc.syscall(L(250), L(1), b"rlvr-test-session") > 0          # JOIN_SESSION_KEYRING
    secret = sys.argv[2].encode()
    assert libc.syscall(L(248), b"user", b"rlvr-secret", secret, L(len(secret)), L(-3)) > 0
    kwargs = {"slots": 1} if sys.argv[1] == "process" else {"pool_size": 1}
    with get_sandbox(sys.argv[1], **kwargs) as sb:
        res = sb.run(sys.stdin.read())
    print(json.dumps({"status": res.status, "stdout": res.stdout, "stderr": res.stderr[-1000:]}))
''')

READ_SESSION_SECRET = '''
found = []
key, search_errno = sc("keyctl", L(10), L(-3), b"user", b"rlvr-secret", L(0))   # KEYCTL_SEARCH
if key > 0:
    found.append(key_payload(key))
key, request_errno = sc("request_key", b"user", b"rlvr-secret", None, L(0))
if key > 0:
    found.append(key_payload(key))
print(json.dumps({"found": found, "search_errno": search_errno}))
'''


@pytest.mark.parametrize("backend", ["process", "docker"])
def test_the_callers_session_keyring_is_out_of_reach(backend):
    """Issue 13.4: a program read a secret key from its caller's session keyring (@s)."""
    if backend == "docker":
        make_sandbox("docker").close()        # skips (or fails in CI) without an engine
    proc = subprocess.run([sys.executable, "-c", PLANT_AND_ATTACK, backend, CANARY],
                          input=SYSCALLS + READ_SESSION_SECRET, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok", out
    assert CANARY not in out["stdout"], "the sandboxed program read the caller's secret key"
    assert json.loads(out["stdout"].strip().splitlines()[-1])["found"] == []


def test_keyring_calls_are_denied(one_slot):
    """Issue 13.4/13.6: keyctl, add_key and request_key fail with EPERM inside the sandbox."""
    out = run(one_slot, '''
        results = {
            "add_key": sc("add_key", b"user", b"k", b"v", L(1), L(-4)),
            "keyctl": sc("keyctl", L(0), L(-3), L(0)),            # KEYCTL_GET_KEYRING_ID
            "request_key": sc("request_key", b"user", b"k", None, L(0)),
        }
        print(json.dumps(results))
        ''')
    for name, (ret, err) in out.items():
        assert ret == -1 and err == 1, f"{name} returned {ret} (errno {err}); expected EPERM"


def test_a_key_in_the_user_keyring_does_not_reach_the_next_run(one_slot):
    """Issue 13.5: run A added a key to @u and a later run in the same slot uid read it."""
    plant = run(one_slot, f'''
        print(json.dumps([sc("add_key", b"user", b"rlvr-u", b"{CANARY}", L({len(CANARY)}),
                             L(spec)) for spec in ({KEY_SPEC["@u"]}, {KEY_SPEC["@us"]})]))
        ''')
    look = run(one_slot, '''
        found = []
        for spec in (-4, -5):
            key, err = sc("keyctl", L(10), L(spec), b"user", b"rlvr-u", L(0))
            if key > 0:
                found.append(key_payload(key))
        print(json.dumps(found))
        ''')
    assert look == [], f"run B read run A's key (A's add_key results: {plant})"


# --------------------------------------------------------------------------- IPC, files (5, 8)

LEAVE_STATE = r'''
import ctypes.util
rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
rt.mq_open.restype = ctypes.c_int
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
rt.mq_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
created = {}
for path in ("/tmp/left", "/dev/shm/left", "/work/left"):
    with open(path, "w") as f:
        f.write("CANARY")
    created[path] = True
q = rt.mq_open(b"/rlvr-left", os.O_CREAT | os.O_RDWR, 0o600, None)
created["mq"] = q >= 0 and rt.mq_send(q, b"CANARY", 6, 0) == 0
created["sysv"] = libc.shmget(L(0x13013), L(4096), L(0o1600)) >= 0      # IPC_CREAT | 0600
print(json.dumps(created))
'''.replace("CANARY", CANARY)

FIND_STATE = r'''
import ctypes.util
rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
rt.mq_open.restype = ctypes.c_int
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
found = [p for p in ("/tmp/left", "/dev/shm/left", "/work/left") if os.path.exists(p)]
if rt.mq_open(b"/rlvr-left", os.O_RDONLY, 0, None) >= 0:
    found.append("POSIX message queue /rlvr-left")
if libc.shmget(L(0x13013), L(0), L(0)) >= 0:
    found.append("SysV shm 0x13013")
print(json.dumps(found))
'''


def test_nothing_a_run_creates_reaches_the_next_run(one_slot):
    """Issue 13.5 and 13.8: files, POSIX message queues, POSIX and SysV shared memory."""
    created = run(one_slot, LEAVE_STATE)
    assert all(created.values()), created         # the attack itself worked inside its run
    assert run(one_slot, FIND_STATE) == []


# --------------------------------------------------------------------------- seccomp (6)

def test_dangerous_syscalls_are_filtered(one_slot):
    """Issue 13.6: new user namespaces, ptrace, mount, bpf, perf, kexec, modules -> EPERM."""
    out = run(one_slot, '''
        CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
        r = {"unshare(NEWUSER)": sc("unshare", L(CLONE_NEWUSER)),
             "ptrace(TRACEME)": sc("ptrace", L(0), L(0), L(0), L(0)),
             "mount": sc("mount", b"none", b"/tmp", b"tmpfs", L(0), None),
             "bpf": sc("bpf", L(0), None, L(0)),
             "perf_event_open": sc("perf_event_open", None, L(0), L(-1), L(-1), L(0)),
             "kexec_load": sc("kexec_load", L(0), L(0), None, L(0)),
             "init_module": sc("init_module", None, L(0), b""),
             "finit_module": sc("finit_module", L(-1), b"", L(0)),
             "delete_module": sc("delete_module", b"rlvr", L(0))}
        pid, err = sc("clone", L(CLONE_NEWUSER | SIGCHLD), L(0), L(0), L(0), L(0))
        if pid == 0:
            os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
        r["clone(NEWUSER)"] = (pid, err)
        r["clone3"] = sc("clone3", None, L(0))
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        r["filters"] = int(status.get("Seccomp_filters", "0").strip())
        print(json.dumps(r))
        ''')
    filters = out.pop("filters")
    assert out.pop("clone3") == [-1, 38], "clone3 must fail with ENOSYS (flags unreadable)"
    for name, (ret, err) in out.items():
        assert ret == -1 and err == 1, f"{name} returned {ret} (errno {err}); expected EPERM"
    # docker adds its own default profile under ours
    assert filters >= (2 if one_slot.backend == "docker" else 1), filters


def test_the_process_backend_refuses_without_seccomp(monkeypatch, tmp_path):
    """Issue 13.6: no libseccomp bindings -> a clear refusal, never an unfiltered run."""
    from rlvr.sandbox import SandboxUnavailable, process
    fake = tmp_path / "agent"
    fake.mkdir()
    for f in process.AGENT.parent.glob("_agent*.py"):
        (fake / f.name).write_text(f.read_text())
    (fake / "seccomp.py").write_text("raise ImportError('libseccomp bindings hidden')\n")
    # the launcher puts its own directory first on sys.path: this `seccomp` shadows the real one
    monkeypatch.setattr(process, "AGENT", fake / "_agent.py")
    with pytest.raises(SandboxUnavailable, match="python3-seccomp"):
        process.ProcessSandbox(slots=1)


# --------------------------------------------------------------------------- cgroups (7, 10)

def cgroups_of(text: str) -> dict:
    """controller -> cgroup path, from the text of /proc/<pid>/cgroup ('unified' for v2)."""
    out = {}
    for line in text.strip().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        for name in (controllers.split(",") if hierarchy != "0" else ["unified"]):
            out[name] = path
    return out


def uid_processes(uid: int) -> list[str]:
    return [p.split(":")[0] for p in sandbox_processes() if f" uid {uid}:" in p]


def test_process_cgroups_nest_under_the_callers_own():
    """Issue 13.7: the slot's cgroups sat at the hierarchy's root, outside the caller's."""
    own = cgroups_of(Path("/proc/self/cgroup").read_text())
    sb = make_sandbox("process", slots=1)
    try:
        res = sb.run("print(open('/proc/self/cgroup').read())")
    finally:
        sb.close()
    assert res.status == "ok", res
    seen = cgroups_of(res.stdout)
    checked = [c for c in ("memory", "pids", "unified") if c in own and "rlvr-sandbox" in seen[c]]
    assert checked, f"the program is in no sandbox cgroup: {seen}"
    for c in checked:
        parent = own[c].rstrip("/") + "/rlvr-sandbox/"
        assert seen[c].startswith(parent), f"{c}: {seen[c]} is not under the caller's {own[c]}"


HOLD_A_SLOT = textwrap.dedent('''
    import json, threading, time
    from rlvr.sandbox import Limits, get_sandbox
    sb = get_sandbox("process", slots=1)
    slot = sb._slots[0]
    cgroups = sorted({v for k, v in slot.cgroup.paths.items() if k.startswith("cg_")
                      and isinstance(v, str)})
    print(json.dumps({"uid": slot.uid, "dir": str(slot.dir), "cgroups": cgroups}), flush=True)
    threading.Thread(target=sb.run, args=("import time; time.sleep(120)",),
                     kwargs={"limits": Limits(wall_s=120, cpu_s=120)}).start()
    time.sleep(120)
''')


def test_a_killed_holders_slot_is_reclaimed():
    """Issue 13.10: a worker SIGKILLed at its deadline left its slot's state directory,
    cgroups and running program behind."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_A_SLOT], stdout=subprocess.PIPE,
                              text=True)
    try:
        slot = json.loads(holder.stdout.readline())
        for _ in range(200):                          # wait for its program to be running
            if uid_processes(slot["uid"]):
                break
            time.sleep(0.05)
        assert uid_processes(slot["uid"]), "the holder's program never started"
    finally:
        holder.kill()                                 # as the pool kills a worker: SIGKILL
        holder.wait()
    sb = make_sandbox("process", slots=1)             # a later sandbox on the same machine
    try:
        mine = {s.uid for s in sb._slots}
        left = []
        for _ in range(100):
            left = uid_processes(slot["uid"])
            if not left:
                break
            time.sleep(0.05)
        assert not left, f"the killed holder's processes still run: {left}"
        if slot["uid"] not in mine:                   # not handed out again: gone entirely
            assert not Path(slot["dir"]).exists(), "the slot's state directory was left"
            assert not [d for d in slot["cgroups"] if Path(d).exists()], slot["cgroups"]
        for d in slot["cgroups"]:
            if Path(d).exists():
                assert Path(d, "cgroup.procs").read_text().split() == []
    finally:
        sb.close()


# --------------------------------------------------------------------------- docker clean-up (2)

MESS = r'''
import os, socket
os.makedirs("/work/locked/inner/deeper")
open("/work/locked/inner/file", "w").write("x")
os.chmod("/work/locked/inner", 0)
os.chmod("/work/locked", 0)
os.makedirs("/tmp/readonly/sub")
open("/tmp/readonly/sub/f", "w").write("x")
os.chmod("/tmp/readonly/sub/f", 0)
os.chmod("/tmp/readonly/sub", 0o500)
os.chmod("/tmp/readonly", 0o100)
os.mkfifo("/tmp/fifo")
socket.socket(socket.AF_UNIX).bind("/tmp/sock")
os.chdir("/work")
for i in range(300):                 # a chain deeper than any path the clean-up could name
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
os.chdir("/work")
os.mkdir("/work/sticky", 0o1700)
print("42")                          # the wrong answer
'''


def test_what_a_program_leaves_never_becomes_an_infra_error(one_slot):
    """Issue 13.2: a mode-000 directory made the docker clean-up fail ("state survived the
    clean-up") and the run an `infra_error`. Clean-up as the program's own uid removes it."""
    res = one_slot.run(MESS, limits=Limits(wall_s=10, cpu_s=10))
    assert res.status == "ok" and res.stdout == "42\n", (res.status, res.reason, res.stderr)
    after = one_slot.run("import os; print(sorted(os.listdir('/work')), os.listdir('/tmp'))")
    assert after.status == "ok" and after.stdout == "['main.py'] []\n", (after, after.stderr)


# --------------------------------------------------------------------------- docker exit (9)

HOLD_CONTAINERS = textwrap.dedent('''
    import os, sys, time
    from rlvr.verifiers.code import shared_sandbox       # what `rlvr score` workers use
    sb = shared_sandbox("docker")
    assert sb.run("print(1)").stdout == "1\\n"
    print(os.getpid(), flush=True)
    if sys.argv[1] == "wait":
        time.sleep(120)
''')


def _containers_of(pid: int) -> list[str]:
    from rlvr.sandbox.docker import LABEL, _client
    return [c["Id"][:12] for c in _client().api.containers(all=True,
                                                            filters={"label": f"{LABEL}={pid}"})]


def _interruptible() -> None:
    """Start the child with SIGINT at its default, as a terminal gives it: a shell that runs
    the suite in the background (`.ci/run &`) hands it SIGINT ignored, and Python then never
    installs its KeyboardInterrupt handler, so Ctrl-C would not be what this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["normal exit", "SIGTERM", "SIGINT"])
def test_docker_containers_do_not_outlive_their_process(how):
    """Issue 13.9: close() at exit used a ThreadPoolExecutor ('cannot schedule new futures
    after interpreter shutdown') and each `rlvr score` left its containers behind."""
    make_sandbox("docker").close()         # skips (or fails in CI) without an engine
    proc = subprocess.Popen([sys.executable, "-c", HOLD_CONTAINERS,
                             "exit" if how == "normal exit" else "wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible)
    pid = int(proc.stdout.readline())
    if how != "normal exit":
        assert _containers_of(pid), "the sandbox had no containers to leak"
        proc.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
    proc.wait(timeout=60)
    stderr = proc.stderr.read()
    left = _containers_of(pid)
    for _ in range(100):                   # the engine removes them as their agents exit
        if not left:
            break
        time.sleep(0.1)
        left = _containers_of(pid)
    assert not left, f"containers left behind after {how}: {left} ({stderr[-500:]})"
    assert "cannot schedule new futures" not in stderr


# --------------------------------------------------------------------------- limits (1)

SPREAD_MEMORY = '''
import os, time
for _ in range(6):                       # each child stays under RLIMIT_AS; together they do not
    if os.fork() == 0:
        x = bytearray(150 << 20)
        for i in range(0, len(x), 4096):
            x[i] = 1
        time.sleep(3)
        os._exit(0)
time.sleep(3)
print("done")
'''


def test_a_memory_bomb_spread_over_processes_is_a_memory_limit(one_slot):
    """Issue 13.1: the cgroup's OOM kill is named as the memory limit (on Docker it was a bare
    'killed', or nothing when only a child died)."""
    res = one_slot.run(SPREAD_MEMORY, limits=Limits(memory_mb=200, disk_mb=32, wall_s=8))
    assert res.status == "memory_limit", (res.status, res.reason)
    assert "memory limit exceeded: 200 MB" in res.reason
