"""The sandbox's attack suite and benign suite, run against both backends.

Every attack test checks the host afterwards (canaries untouched, no process of a sandbox uid
left, no file written) and fails if containment broke; every benign program must pass, because
over-restriction is a bug too.
"""
from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from rlvr.sandbox import Limits, RunResult
from rlvr.sandbox._agent_core import cgroup_first_slack
from sandbox_support import (CANARY, ENV_CANARY, TEST_LIMITS, make_sandbox,
                             sandbox_processes, sandbox_shm_segments,
                             sandbox_uids)


@pytest.fixture(scope="module", params=["process", "docker"])
def sb(request):
    sandbox = make_sandbox(request.param)
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="module")
def canary_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("host-secret") / "secret.txt"
    path.write_text(CANARY)
    return path


def run(sb, code, **kw) -> RunResult:
    res = sb.run(textwrap.dedent(code), **kw)
    assert res.status != "infra_error", res.reason
    return res


def assert_contained(sb):
    """Nothing a run started may survive it (allow the kernel a moment to finish reaping)."""
    for _ in range(50):
        left = sandbox_processes(sandbox_uids(sb))
        if not left:
            break
        time.sleep(0.05)
    assert not left, f"processes survived the run: {left}"
    assert sb.run("print('still serving')").stdout == "still serving\n"


# --------------------------------------------------------------------------- attacks

def test_infinite_loop_times_out(sb):
    res = run(sb, "while True: pass", limits=Limits(wall_s=2, cpu_s=1))
    assert res.status == "timeout", res
    assert res.wall_s < 4
    assert_contained(sb)


def test_sleep_past_deadline_is_killed(sb):
    res = run(sb, "import time; time.sleep(60)", limits=Limits(wall_s=1))
    assert res.status == "timeout" and res.wall_s < 3, res
    assert_contained(sb)


def test_ignoring_sigterm_does_not_help(sb):
    res = run(sb, """
        import signal, time
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM):
            signal.signal(s, signal.SIG_IGN)
        while True: time.sleep(0.01)
        """, limits=Limits(wall_s=1))
    assert res.status == "timeout", res
    assert_contained(sb)


def test_fork_bomb_is_contained(sb):
    res = run(sb, """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """, limits=Limits(wall_s=2, cpu_s=2, processes=32))
    # the process backend's pids cgroup counts refused forks, so it names the limit itself
    expected = ("process_limit",) if sb.backend == "process" else ("timeout", "killed")
    assert res.status in expected, res
    assert_contained(sb)


def test_a_fork_bomb_at_the_run_cgroups_limit_is_named_by_the_kernels_count(sb):
    """Where the run's process limit is its cgroup's (a process slot's; a container at its
    pool's limit) the cgroup refuses first and counts what it refused, so even a bomb whose
    first refused fork ends the program is `process_limit`, read from the kernel."""
    res = run(sb, """
        import os
        while True:
            os.fork()
        """, limits=Limits(wall_s=4, cpu_s=3, processes=TEST_LIMITS.processes))
    assert res.status == "process_limit", res
    assert_contained(sb)


def test_a_run_gets_and_reports_the_limits_it_ran_under(sb):
    """A run asking for more than a container's fixed pids/memory/disk gets the container's,
    and its result says so (a verdict naming a limit must name the one that bound)."""
    asked = Limits(wall_s=4, cpu_s=3, processes=TEST_LIMITS.processes + 16,
                   memory_mb=TEST_LIMITS.memory_mb + 400, disk_mb=TEST_LIMITS.disk_mb + 32)
    res = run(sb, """
        import resource
        print(resource.getrlimit(resource.RLIMIT_NPROC)[0],
              resource.getrlimit(resource.RLIMIT_AS)[0] >> 20)
        """, limits=asked)
    nproc, as_mb = map(int, res.stdout.split())
    got = res.limits
    if sb.backend == "docker":
        assert (got.processes, got.memory_mb, got.disk_mb) == \
            (TEST_LIMITS.processes, TEST_LIMITS.memory_mb, TEST_LIMITS.disk_mb)
    else:                               # a slot's cgroup is set per run: what was asked
        assert got == asked
    # the run's cgroup holds it to `processes`; RLIMIT_NPROC stands above it (cgroup_first_slack)
    assert as_mb == got.memory_mb and nproc == got.processes + cgroup_first_slack(got.processes)


def test_memory_bomb_hits_the_limit(sb):
    res = run(sb, """
        chunks = []
        while True:
            chunks.append(bytearray(50 << 20))
        """, limits=Limits(wall_s=5, memory_mb=300))
    assert res.status == "memory_limit", res
    assert_contained(sb)


def test_gigabyte_of_stdout_is_cut_off(sb):
    start = time.monotonic()
    res = run(sb, """
        import sys
        block = "x" * (1 << 20)
        for _ in range(1024):
            sys.stdout.write(block)
        """, limits=Limits(wall_s=10, output_bytes=64 << 10))
    assert res.status == "output_limit", res
    assert len(res.stdout) <= 64 << 10 and res.truncated
    assert time.monotonic() - start < 10        # cut off, never left to run to its wall limit
    assert_contained(sb)


def test_writing_outside_the_work_dir_fails(sb, canary_file):
    targets = ["/x", "/etc/x", "/usr/x", "/usr/lib/x", "/bin/x", "/dev/x", "/proc/x", "/run/x",
               "/root/x", str(canary_file), str(canary_file.parent / "new.txt"),
               "/var/run/docker.sock", "/proc/sys/kernel/hostname"]
    res = run(sb, f"""
        written = []
        for path in {targets!r}:
            try:
                with open(path, "w") as f:
                    f.write("pwned")
                written.append(path)
            except OSError:
                pass
        print("WRITTEN", written)
        """)
    assert res.stdout.strip() == "WRITTEN []", res
    assert canary_file.read_text() == CANARY
    assert sorted(p.name for p in canary_file.parent.iterdir()) == ["secret.txt"]
    assert not Path("/usr/x").exists() and not Path("/x").exists()
    assert_contained(sb)


def test_host_secrets_are_unreadable(sb, canary_file):
    assert os.environ[ENV_CANARY] == CANARY   # planted in this (host) process
    res = run(sb, f"""
        import glob, os
        seen = [repr(dict(os.environ))]
        for path in [{str(canary_file)!r}, "/root", "/home", "/var/run/docker.sock",
                     "/run/docker.sock", "/etc/shadow"] + glob.glob("/proc/*/environ") \\
                    + glob.glob("/proc/*/cmdline"):
            try:
                if os.path.isdir(path):
                    seen.append(repr(os.listdir(path)))
                else:
                    seen.append(open(path, "rb").read().decode("latin-1"))
                print("READ", path)
            except OSError:
                pass
        for root, dirs, files in os.walk("/"):
            if root.startswith(("/proc", "/sys", "/usr", "/dev")):
                dirs[:] = []   # not even listed: the host's /usr (15,000 directories) can outlast
                               # the 4 s limit when the disk cache is cold
                continue
            for name in files:
                try:
                    seen.append(open(os.path.join(root, name), "rb").read(1 << 16).decode("latin-1"))
                except OSError:
                    pass
        needle = {CANARY[::-1]!r}[::-1]   # the program's own source must not hold the canary
        print("FOUND" if needle in "".join(seen) else "CLEAN")
        print("DOCKER_SOCKET", os.path.exists("/var/run/docker.sock"))
        """)
    assert res.status == "ok", res
    assert "CLEAN" in res.stdout and CANARY not in res.stdout + res.stderr, res.stdout
    assert "DOCKER_SOCKET False" in res.stdout
    assert f"READ {canary_file}" not in res.stdout
    assert_contained(sb)


def test_no_network_not_even_the_hosts_loopback(sb):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.3)
    port = listener.getsockname()[1]
    res = run(sb, f"""
        import socket
        for addr in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443), ("10.0.0.1", 80)]:
            s = socket.socket()
            s.settimeout(1)
            try:
                s.connect(addr)
                print("CONNECTED", addr)
            except OSError as exc:
                print("blocked", addr, type(exc).__name__)
        try:
            socket.getaddrinfo("example.com", 80)
            print("RESOLVED")
        except OSError:
            print("no dns")
        """)
    try:
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    assert "CONNECTED" not in res.stdout and "RESOLVED" not in res.stdout, res.stdout
    assert res.stdout.count("blocked") == 4
    assert_contained(sb)


def test_double_forked_daemon_does_not_outlive_the_run(sb):
    res = run(sb, """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.closerange(0, 64)
                time.sleep(120)
            os._exit(0)
        time.sleep(0.2)
        print("parent done")
        """)
    assert res.status == "ok" and res.stdout == "parent done\n", res
    assert_contained(sb)


def test_setsid_child_does_not_outlive_the_run(sb):
    res = run(sb, """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        print("spawned")
        """)
    assert res.status == "ok", res
    assert_contained(sb)


def test_killing_the_parent_and_everything_else(sb):
    res = run(sb, """
        import os, signal
        for pid in (os.getppid(), 1, -1):
            try:
                os.kill(pid, signal.SIGKILL)
                print("sent", pid)
            except OSError as exc:
                print("refused", pid, type(exc).__name__)
        print("alive")
        """)
    assert res.status in ("ok", "killed"), res
    assert "sent 1\n" not in res.stdout     # PID 1 is the supervisor: out of reach
    assert_contained(sb)


def test_filling_the_disk_stays_in_the_runs_tmpfs(sb):
    res = run(sb, """
        total = 0
        try:
            with open("fill.bin", "wb") as f:
                while True:
                    f.write(b"x" * (1 << 20))
                    f.flush()
                    total += 1
        except OSError as exc:
            print("stopped", total, type(exc).__name__)
        """, limits=Limits(wall_s=5, file_mb=1024, disk_mb=TEST_LIMITS.disk_mb))
    assert res.status in ("ok", "output_limit"), res
    assert "stopped" in res.stdout and int(res.stdout.split()[1]) <= TEST_LIMITS.disk_mb
    after = run(sb, "import os; print(sorted(os.listdir('.')), os.listdir('/tmp'))")
    assert after.stdout == "['main.py'] []\n", after   # a fresh work dir for every run
    assert_contained(sb)


def test_file_size_limit(sb):
    res = run(sb, """
        with open("big.bin", "wb") as f:
            f.write(b"x" * (4 << 20))
        """, limits=Limits(file_mb=1))
    # Python ignores SIGXFSZ, so the write fails with EFBIG; a C program would get the signal.
    assert res.status == "runtime_error" and "File too large" in res.stderr, res


def test_exhausting_file_descriptors(sb):
    res = run(sb, """
        fds = []
        try:
            while True:
                fds.append(open("/dev/null"))
        except OSError as exc:
            print("stopped at", len(fds), type(exc).__name__)
        """)
    assert res.status == "ok" and "stopped at" in res.stdout, res
    assert int(res.stdout.split()[2]) < TEST_LIMITS.open_files
    assert_contained(sb)


def test_deep_recursion_crash_is_a_runtime_error(sb):
    res = run(sb, """
        import sys
        sys.setrecursionlimit(10 ** 8)
        nested = []
        for _ in range(10 ** 6):
            nested = [nested]
        print(repr(nested)[:10])
        """)
    assert res.status in ("runtime_error", "memory_limit"), res
    assert_contained(sb)


def test_sysv_shared_memory_does_not_outlive_the_run(sb):
    res = run(sb, """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        shmid = libc.shmget(0, 1 << 20, 0o1000 | 0o666)   # IPC_PRIVATE, IPC_CREAT
        print("segment", shmid)
        """)
    assert res.status == "ok" and int(res.stdout.split()[1]) >= 0, res
    assert not sandbox_shm_segments()
    for _ in range(sb.concurrency):   # every warm container / slot in turn
        after = run(sb, "print(len(open('/proc/sysvipc/shm').read().splitlines()) - 1)")
        assert after.stdout == "0\n", "a SysV segment survived into a later run"


def test_no_capabilities_and_not_root(sb):
    res = run(sb, """
        import os
        status = open("/proc/self/status").read()
        caps = {l.split(":")[0]: l.split()[1] for l in status.splitlines() if l.startswith("Cap")}
        print(os.getuid(), os.geteuid(), caps["CapEff"], caps["CapPrm"], caps["CapAmb"])
        print([l for l in status.splitlines() if l.startswith("NoNewPrivs")][0].split()[1])
        """)
    uid, euid, eff, prm, amb, nnp = res.stdout.split()
    assert int(uid) != 0 and int(euid) != 0
    assert int(eff, 16) == int(prm, 16) == int(amb, 16) == 0
    assert nnp == "1"


# --------------------------------------------------------------------------- benign programs

BENIGN = {
    "hello": ("print('hello, world')", "hello, world\n"),
    "stdin": ("import sys; print(sum(int(x) for x in sys.stdin.read().split()))", "6\n"),
    "threads": ("""
        import threading
        out = [0] * 8
        def work(i): out[i] = sum(range(i * 1000))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(sum(out))
        """, f"{sum(sum(range(i * 1000)) for i in range(8))}\n"),
    "multiprocessing": ("""
        import multiprocessing as mp
        def sq(x): return x * x
        if __name__ == "__main__":
            with mp.Pool(2) as pool:
                print(sum(pool.map(sq, range(10))))
            q = mp.Queue(); p = mp.Process(target=q.put, args=(7,)); p.start()
            print(q.get()); p.join()
        """, "285\n7\n"),
    "subprocess": ("""
        import subprocess, sys
        out = subprocess.run([sys.executable, "-c", "print(40 + 2)"], capture_output=True,
                             text=True, check=True).stdout
        print(out.strip(), subprocess.run(["sh", "-c", "echo shell"], capture_output=True,
                                          text=True).stdout.strip())
        """, "42 shell\n"),
    "file_io": ("""
        import os
        os.makedirs("sub/dir", exist_ok=True)
        with open("sub/dir/a.txt", "w") as f: f.write("data")
        print(open("sub/dir/a.txt").read(), sorted(os.listdir(".")), open("given.txt").read())
        """, "data ['given.txt', 'helper.py', 'main.py', 'sub'] provided\n"),
    "tmp_files": ("""
        import tempfile
        with tempfile.NamedTemporaryFile("w+") as f:
            f.write("tmp ok"); f.flush(); f.seek(0); print(f.read())
        """, "tmp ok\n"),
    "alloc_256mb": ("""
        buf = bytearray(256 << 20)
        for i in range(0, len(buf), 4096): buf[i] = 1
        print(sum(buf[::4096]))
        """, f"{(256 << 20) // 4096}\n"),
    "deep_recursion": ("""
        import sys
        sys.setrecursionlimit(100000)
        def depth(n): return 0 if n == 0 else 1 + depth(n - 1)
        print(depth(50000))
        """, "50000\n"),
    "helper_module": ("import helper; print(helper.double(21))", "42\n"),
    "unicode_and_stderr": ("""
        import sys
        print("héllo ✓"); print("warn", file=sys.stderr)
        """, "héllo ✓\n"),
    "stdlib_heavy": ("""
        import json, re, collections, itertools, fractions, decimal, sqlite3
        db = sqlite3.connect(":memory:"); db.execute("create table t(x)")
        db.executemany("insert into t values (?)", [(i,) for i in range(5)])
        print(db.execute("select sum(x) from t").fetchone()[0], json.dumps({"a": [1]}))
        """, '10 {"a": [1]}\n'),
    "shared_memory": ("""
        from multiprocessing import shared_memory
        shm = shared_memory.SharedMemory(create=True, size=1024)
        shm.buf[0] = 9; print(shm.buf[0]); shm.close(); shm.unlink()
        """, "9\n"),
}
FILES = {"given.txt": "provided", "helper.py": "def double(x):\n    return 2 * x\n"}


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_benign_program_passes(sb, name):
    code, expected = BENIGN[name]
    res = run(sb, code, stdin="1 2 3\n", files=FILES)
    assert res.status == "ok", (res.status, res.reason, res.stderr[-2000:])
    assert res.stdout == expected
    if name == "unicode_and_stderr":
        assert res.stderr == "warn\n"


def test_runtime_error_and_exit_codes(sb):
    res = run(sb, "raise ValueError('boom')")
    assert res.status == "runtime_error" and res.exit_code == 1
    assert "ValueError: boom" in res.stderr
    assert run(sb, "import sys; sys.exit(3)").exit_code == 3


def test_c_program_compiles_and_runs(sb):
    res = run(sb, '#include <stdio.h>\nint main(){int a,b;scanf("%d %d",&a,&b);'
                  'printf("%d\\n",a+b);return 0;}', language="c", stdin="2 40")
    assert res.status == "ok" and res.stdout == "42\n", res


def test_concurrent_runs_are_isolated(sb):
    from rlvr.sandbox import Job
    jobs = [Job(f"import os; open('mine', 'w').write('{i}'); print(sorted(os.listdir('.')), "
                f"open('mine').read())") for i in range(6)]
    results = sb.run_many(jobs)
    assert [r.stdout for r in results] == [f"['main.py', 'mine'] {i}\n" for i in range(6)]


def test_agent_refuses_to_supervise_outside_its_own_pid_namespace(monkeypatch):
    """kill(-1) from the host's PID namespace would kill every process root may signal."""
    import importlib.util
    from rlvr.sandbox import process
    spec = importlib.util.spec_from_file_location("rlvr_agent_under_test",
                                                  process.AGENT.with_name("_agent_core.py"))
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    killed = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("a program forked outside a namespace"))
    with pytest.raises(agent.NotNamespaceInit):
        agent.Program(confine=None)
    with pytest.raises(agent.NotNamespaceInit):
        agent._kill_all()
    agent.RUNNER["container"] = True       # a container's runner must be PID 1's own child
    # (whatever started this test: a test runner whose parent exited is PID 1's child too)
    monkeypatch.setattr(os, "getppid", lambda: 4242)
    with pytest.raises(agent.NotNamespaceInit):
        agent._kill_all()
    assert killed == []


def test_fail_closed_without_root(monkeypatch):
    from rlvr.sandbox import SandboxUnavailable, get_sandbox
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable, match="needs root"):
        get_sandbox("process")


def test_fail_closed_without_a_docker_engine(monkeypatch):
    from rlvr.sandbox import SandboxUnavailable, get_sandbox
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match="docker.io"):
        get_sandbox("docker")


def test_cli_sandbox_run_prints_output_then_a_json_result(tmp_path, capsys):
    import json
    from rlvr.cli import main
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nprint('out', sys.stdin.read().strip())\nsys.exit(3)\n")
    stdin = tmp_path / "in.txt"
    stdin.write_text("given")
    assert main(["sandbox", "run", str(prog), "--stdin", str(stdin), "--wall-s", "5"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "out given"
    result = json.loads(out[-1])
    assert result["status"] == "runtime_error" and result["exit_code"] == 3
    assert result["backend"] == "process"


def test_a_launcher_outlives_the_thread_that_started_it():
    """PR_SET_PDEATHSIG fires when the creating *thread* exits; a launcher started on behalf of
    a short-lived thread must survive it."""
    import threading
    from rlvr.sandbox.process import _Slot
    from rlvr.sandbox.base import SYSTEM_PYTHON
    import base64
    from dataclasses import asdict
    slots, answers = [], []

    def first_use():      # the launcher is started, and answers a run, from this thread
        slots.append(_Slot(SYSTEM_PYTHON))
        req = {"argv": [SYSTEM_PYTHON, "-s", "main.py"], "stdin": "", "warm": True,
               "files": {"main.py": base64.b64encode(b"print(1)").decode()},
               "limits": asdict(TEST_LIMITS), "uid": slots[0].uid}
        answers.append(slots[0].call(req, 30))

    t = threading.Thread(target=first_use)
    t.start()
    t.join()
    slot = slots[0]
    try:
        assert answers[0].get("exit_code") == 0, answers
        time.sleep(0.5)
        assert slot.proc.poll() is None, "the launcher died with the thread that started it"
    finally:
        slot.close()
