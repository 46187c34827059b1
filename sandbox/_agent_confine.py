"""The program's last restrictions, applied in its own process after it dropped to its uid.

1. Keyrings. The kernel's keyrings are not namespaced by anything the sandbox creates: the
   launcher's session keyring is its caller's, and the slot uid's user keyring (`@u`) lives as
   long as the uid does, across runs. So each run joins a fresh, empty session keyring and
   clears `@u` and `@us` before its program starts (keyctl(2): KEYCTL_JOIN_SESSION_KEYRING,
   KEYCTL_CLEAR) -- and then the keyring syscalls are denied outright.
2. A seccomp filter (seccomp(2)), built with libseccomp's own Python bindings (Debian's
   `python3-seccomp`: the agent runs under the system interpreter) rather than hand-written BPF:
   the library resolves syscall numbers per architecture and kills calls made through a foreign
   ABI (32-bit `int 0x80`, x32), the classic way round a filter written for one table.
   Denied with EPERM: the keyring calls; new user namespaces (`unshare`/`clone` with
   CLONE_NEWUSER -- an unprivileged program's only way to capabilities); `ptrace` and the
   cross-process memory calls; `mount` and the new mount API; `bpf`; `perf_event_open`; kexec;
   module loading; io_uring (its requests bypass a filter). `clone3` gets ENOSYS, because a
   filter cannot read its flags from memory; C libraries then fall back to `clone`, as under
   Docker's default profile.

The filter is built and compiled to BPF by the library once per agent; each program's process
then installs that compiled program with one prctl(PR_SET_SECCOMP) (libseccomp's own `load()`
regenerates the BPF on every call: ~0.5 ms a run here, ~2% of a trivial one). Without the
bindings the agent refuses to run anything.
"""
import ctypes
import errno
import tempfile

try:
    import seccomp
except ImportError:     # reported by Confinement(), so the host's caller sees why
    seccomp = None

__all__ = ["Confinement", "DENIED_SYSCALLS", "ConfinementUnavailable"]

CLONE_NEWUSER = 0x10000000
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SOCK_FILTER_SIZE = 8        # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k


class _SockFprog(ctypes.Structure):
    """struct sock_fprog, the compiled filter handed to prctl(PR_SET_SECCOMP)."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
DENIED_SYSCALLS = (
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev",
    "mount", "umount2", "pivot_root", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount",
    "open_tree", "setns",
    "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "swapon", "swapoff", "reboot", "acct", "open_by_handle_at",
)
INSTALL_HINT = ("the sandbox filters system calls with libseccomp's Python bindings, which the "
                "system interpreter cannot import; install them with `apt-get install -y "
                "python3-seccomp` (scripts/services.sh does)")


class ConfinementUnavailable(RuntimeError):
    """The seccomp bindings are missing: the agent must not run programs unfiltered."""


class Confinement:
    """Built once per agent; `apply()` runs in each program's process after setuid."""

    def __init__(self, keyrings_required: bool = True):
        if seccomp is None:
            raise ConfinementUnavailable(INSTALL_HINT)
        self.keyrings_required = keyrings_required
        """Process mode: a keyring call that fails is fatal. Docker's own profile already denies
        keyctl to the agent, so there the keyrings are out of reach either way."""
        arch = seccomp.Arch.NATIVE
        self._keyctl = seccomp.resolve_syscall(arch, "keyctl")
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall, self._prctl = libc.syscall, libc.prctl   # resolved once, not per run
        self.filter = self._build()
        with tempfile.TemporaryFile() as f:      # the library's BPF, compiled once
            self.filter.export_bpf(f)
            f.seek(0)
            bpf = f.read()
        self._bpf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // SOCK_FILTER_SIZE,
                                ctypes.cast(self._bpf, ctypes.c_void_p))

    @staticmethod
    def _build():
        f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        eperm = seccomp.ERRNO(errno.EPERM)
        for name in DENIED_SYSCALLS:
            f.add_rule(eperm, name)
        for name in ("unshare", "clone"):   # flags are the first argument of both (x86-64, arm64)
            f.add_rule(eperm, name, seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER,
                                                CLONE_NEWUSER))
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        return f

    def _keyctl_call(self, *args) -> None:
        ret = self._syscall(ctypes.c_long(self._keyctl),
                                 *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
        if ret < 0:
            err = ctypes.get_errno()
            if self.keyrings_required and err != errno.ENOSYS:   # ENOSYS: no keyrings at all
                raise OSError(err, f"keyctl{args[:1]}: {errno.errorcode.get(err, err)}")

    def apply(self) -> None:
        """Fresh session keyring, empty user keyrings, then the filter (no_new_privs is set)."""
        self._keyctl_call(KEYCTL_JOIN_SESSION_KEYRING, None)
        self._keyctl_call(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
        self._keyctl_call(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"installing the seccomp filter: {errno.errorcode.get(err, err)}")
