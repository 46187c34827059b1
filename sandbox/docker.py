"""The `docker` backend: a warm pool of locked-down containers, each running the sandbox agent.

Each container has no network, a read-only root, tmpfs /work, /tmp and /dev/shm, memory, pids
and CPU limits, `no-new-privileges`, and the host's /usr mounted read-only (no registry is
reachable here, so the image is only a skeleton filesystem imported locally by
`rlvr sandbox build-image`). Programs run as an unprivileged uid (one per container) with no capabilities. The agent is PID 1
and keeps exactly three capabilities (SETUID/SETGID to drop to the program's uid, KILL to kill
everything the program left behind); after every run it SIGKILLs every other process in the
container and wipes the writable directories, so each execution starts from a fresh filesystem
state without paying for a new container. A container whose agent fails is removed and replaced.
"""
from __future__ import annotations

import io
import json
import os
import queue
import socket
import struct
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from hashlib import sha256
from pathlib import Path

from ._agent_core import AGENT_TASKS, inode_cap
from ._uids import claim_uid
from .base import RESPONSE_MARGIN_S, SYSTEM_PYTHON, Limits, Sandbox, SandboxUnavailable

__all__ = ["DockerSandbox", "build_image", "image_tag"]

AGENT = Path(__file__).with_name("_agent.py")
AGENT_FILES = ("_agent.py", "_agent_core.py", "_agent_confine.py", "_agent_process.py",
               "_agent_docker.py")
REPOSITORY = "rlvr-sandbox"
LABEL = "rlvr.sandbox.pid"
INSTALL_HINT = ("install and start the Docker engine: `apt-get install -y docker.io` then "
                "`dockerd --iptables=false --bridge=none &` (or run scripts/services.sh), and "
                "`pip install docker`")


def image_tag() -> str:
    """The image is named after the agent it carries, so an upgraded agent gets a new image."""
    digest = sha256(b"".join(AGENT.with_name(f).read_bytes() for f in AGENT_FILES))
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def _client():
    try:
        import docker
    except ImportError as exc:
        raise SandboxUnavailable(f"the docker backend needs the docker SDK; {INSTALL_HINT}") from exc
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # the SDK raises several unrelated types for "no engine"
        raise SandboxUnavailable(f"no Docker engine reachable ({type(exc).__name__}: {exc}); "
                                 f"{INSTALL_HINT}") from exc
    return client


def _rootfs_tar() -> bytes:
    """A skeleton root: mount points, the host's /usr-merge symlinks, users, and the agent."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, mode=0o755, data=None, link=None):
            info = tarfile.TarInfo(name)
            info.mode = mode
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
            elif data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        for d in ("usr", "etc", "work", "tmp", "run", "proc", "dev", "sys", "opt", "opt/rlvr"):
            add(d, 0o1777 if d in ("tmp", "work") else 0o755)
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            if os.path.islink("/" + name):
                add(name, link=os.readlink("/" + name))
        add("etc/passwd", 0o644, b"root:x:0:0::/:/bin/false\n")
        add("etc/group", 0o644, b"root:x:0:\n")
        add("etc/ld.so.cache", 0o644, b"")
        for name in AGENT_FILES:
            add(f"opt/rlvr/{name}", 0o644, AGENT.with_name(name).read_bytes())
    return buf.getvalue()


def build_image(force: bool = False) -> str:
    """Import the sandbox image locally (no registry needed); returns its tag."""
    client = _client()
    tag = image_tag()
    if not force:
        try:
            client.images.get(tag)
            return tag
        except Exception:  # docker.errors.ImageNotFound
            pass
    repo, _, version = tag.partition(":")
    client.api.import_image_from_data(_rootfs_tar(), repository=repo, tag=version)
    client.images.get(tag)
    return tag


class _AttachedStream:
    """Frames from a container's stdout over Docker's multiplexed attach socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, bytearray()

    def _fill(self, deadline: float) -> None:
        self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            head = self._recv_exact(8)
            stream, size = head[0], struct.unpack(">I", head[4:])[0]
            payload = self._recv_exact(size)
        except socket.timeout as exc:
            raise TimeoutError("no answer from the container agent in time") from exc
        if stream == 1:
            self.buf += payload

    def _recv_exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError("the container agent closed its channel")
            data += chunk
        return bytes(data)

    def read_frame(self, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while len(self.buf) < 4:
            self._fill(deadline)
        size = struct.unpack(">I", self.buf[:4])[0]
        while len(self.buf) < 4 + size:
            self._fill(deadline)
        body, self.buf = bytes(self.buf[4:4 + size]), self.buf[4 + size:]
        return json.loads(body)


class _Container:
    """One warm container whose lifetime is tied to this process's attach socket.

    It is created with StdinOnce and AutoRemove: when the socket closes -- `remove()`, a normal
    exit, SIGTERM, SIGKILL, anything -- the agent reads end-of-file, exits, and the engine
    deletes the container. No exit hook has to run for a container not to leak.
    """

    def __init__(self, client, image: str, limits: Limits, python: str):
        self.uid, self._lock_file = claim_uid()   # its own uid: RLIMIT_NPROC is per uid
        self.api = client.api
        try:
            self.id = self._create(client.api, image, limits, python)
        except Exception:
            self._lock_file.close()
            raise
        try:   # attach before start: ours is the one attachment whose end closes stdin
            raw = self.api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stream": 1})
            self.api.start(self.id)
        except Exception:
            self._force_remove()
            self._lock_file.close()
            raise
        self.sock = getattr(raw, "_sock", raw)
        self.stream = _AttachedStream(self.sock)

    @staticmethod
    def _create(api, image, limits, python) -> str:
        """The container: no network, read-only root, tmpfs scratch, limits, 3 capabilities."""
        mem = (limits.memory_mb + limits.disk_mb + 128) << 20
        scratch = f"size={limits.disk_mb}m,nr_inodes={inode_cap(asdict(limits))},mode=1777"
        host = api.create_host_config(
            network_mode="none", read_only=True, auto_remove=True,
            tmpfs={"/work": scratch, "/tmp": scratch + ",exec", "/run": "size=16m,mode=700"},
            shm_size=f"{limits.disk_mb}m", mem_limit=mem, memswap_limit=mem,
            # the program's tree, plus the agent's tasks (at least two besides: the program's
            # pre-forked process and the helper writing its files exist before it runs)
            pids_limit=max(limits.processes, 2) + AGENT_TASKS, nano_cpus=10**9, cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "KILL"], security_opt=["no-new-privileges"],
            binds={"/usr": {"bind": "/usr", "mode": "ro"},
                   "/etc/ld.so.cache": {"bind": "/etc/ld.so.cache", "mode": "ro"}},
            ipc_mode="private")
        created = api.create_container(
            image, [python, "-I", "/opt/rlvr/_agent.py", json.dumps({"mode": "docker"})],
            detach=False, stdin_open=True, tty=False, user="0:0", hostname="sandbox",
            environment={}, labels={LABEL: str(os.getpid())}, working_dir="/",
            host_config=host)
        return created["Id"]

    def call(self, request: dict, timeout_s: float) -> dict:
        data = json.dumps(request).encode()
        self.sock.settimeout(timeout_s)
        self.sock.sendall(struct.pack(">I", len(data)) + data)
        return self.stream.read_frame(timeout_s)

    def _force_remove(self) -> None:
        try:
            self.api.remove_container(self.id, force=True)
        except Exception:  # already gone, or its auto-removal is under way
            pass

    def remove(self) -> None:
        """Synchronous: the container is gone (or going, by the engine's auto-removal) on
        return. Plain calls on this thread, so it also works from an exit hook."""
        try:
            self.sock.close()
        except OSError:
            pass
        self._force_remove()
        self._lock_file.close()


def _remove_orphans(client) -> None:
    """Remove sandbox containers left by rlvr processes that died without closing their pool
    (a fallback: containers remove themselves when their process's socket closes)."""
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        try:
            os.kill(int((c.get("Labels") or {}).get(LABEL, "0")), 0)
        except (ProcessLookupError, ValueError):
            try:
                client.api.remove_container(c["Id"], force=True)
            except Exception:  # removed meanwhile (by its own auto-removal)
                pass
        except PermissionError:
            pass


class DockerSandbox(Sandbox):
    """Runs programs in a warm pool of `pool_size` containers (built from `rlvr sandbox
    build-image`); per-run limits may only tighten the container's own memory/pids limits.

    >>> with DockerSandbox(pool_size=2) as sb:                   # doctest: +SKIP
    ...     sb.run("print(6 * 7)").stdout
    '42\\n'
    """
    backend = "docker"
    startup_s = 120.0
    """The pool's containers start in parallel; each takes create, attach and start calls under
    the SDK client's 30 s timeout, after a ping and an image check."""

    def __init__(self, limits: Limits | None = None, pool_size: int | None = None,
                 python: str = SYSTEM_PYTHON, image: str | None = None, warm: bool = True):
        super().__init__(limits, python, warm)
        self.client = _client()
        self.image = image or image_tag()
        try:
            self.client.images.get(self.image)
        except Exception as exc:
            raise SandboxUnavailable(f"sandbox image {self.image} is missing; build it with "
                                     "`rlvr sandbox build-image`") from exc
        _remove_orphans(self.client)
        self.pool_size = max(1, pool_size or os.cpu_count() or 1)
        self._free: queue.Queue[_Container] = queue.Queue()
        self._all: set[_Container] = set()
        with ThreadPoolExecutor(self.pool_size) as ex:
            for c in ex.map(lambda _: self._new(), range(self.pool_size)):
                self._free.put(c)

    @property
    def concurrency(self) -> int:
        return self.pool_size

    def _new(self) -> _Container:
        try:
            c = _Container(self.client, self.image, self.limits, self.python)
        except Exception as exc:
            raise SandboxUnavailable(f"could not start a sandbox container: {exc}") from exc
        with self._lock:
            self._all.add(c)
        return c

    def _retire(self, c: _Container) -> None:
        with self._lock:
            self._all.discard(c)
        c.remove()

    def _effective(self, limits: Limits) -> Limits:
        """A run's processes, memory and disk are at most the container's (its pids, memory
        and tmpfs sizes are fixed when it starts): a run asking for more gets those, and its
        result says so, so a verdict never names a limit the run did not have."""
        own = self.limits
        return replace(limits, processes=min(limits.processes, own.processes),
                       memory_mb=min(limits.memory_mb, own.memory_mb),
                       disk_mb=min(limits.disk_mb, own.disk_mb))

    def _execute(self, request: dict, limits: Limits) -> dict:
        if self._closed:
            raise SandboxUnavailable("this sandbox is closed")
        with self._lock:
            exhausted = not self._all
        if exhausted:   # every replacement failed: make one now, so the engine's reason surfaces
            self._free.put(self._new())
        try:
            c = self._free.get(timeout=limits.wall_s + RESPONSE_MARGIN_S)
        except queue.Empty:
            raise SandboxUnavailable("no sandbox container became free in time") from None
        request = {**request, "uid": c.uid}
        try:
            raw = c.call(request, limits.wall_s + RESPONSE_MARGIN_S)
        except (OSError, EOFError, ValueError, TimeoutError) as exc:
            raw = {"infra_error": f"container agent failed ({type(exc).__name__}: {exc})",
                   "retire": True}
        if raw.get("retire"):
            self._retire(c)
            threading.Thread(target=self._replace, daemon=True).start()
        else:
            self._free.put(c)
        return raw

    def _replace(self) -> None:
        """Start a retired container's successor in the background. If the engine refuses, the
        pool shrinks; once it is empty, `_execute` creates containers on demand and raises the
        engine's own reason as an infra failure."""
        try:
            self._free.put(self._new())
        except SandboxUnavailable:
            return

    def close(self) -> None:
        """Remove every container now, on this thread (no executor: this runs from exit hooks,
        after the interpreter refuses new futures). Closing the sockets first lets each agent
        exit while the next removal is requested."""
        with self._lock:
            self._closed = True
            containers, self._all = list(self._all), set()
        for c in containers:
            try:
                c.sock.close()
            except OSError:
                pass
        for c in containers:
            c.remove()
