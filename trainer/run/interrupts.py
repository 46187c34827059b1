"""Ctrl-C and SIGTERM during a run: the first asks the loop to stop after the step in progress
and checkpoint it (so the resumed run is the uninterrupted one), a second stops at once, keeping
the latest checkpoint. Either way the message names what was kept and the resume command."""
from __future__ import annotations

import shlex
import signal
import sys
import threading

__all__ = ["RunInterrupted", "StopSignal", "resume_command"]


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by a signal; the message says what was kept and how to resume, and
    `exit_code` is the shell's (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.exit_code = 128 + int(signum)


def resume_command(command: str, run_dir) -> str:
    """The command line that continues the run in `run_dir`."""
    return f"{command} --resume {shlex.quote(str(run_dir))}"


class StopSignal:
    """While entered (in the main thread): SIGINT/SIGTERM set `requested` and say so; a second
    one raises KeyboardInterrupt where the run is. A signal that was ignored stays ignored.
    `note()` is the line printed at the first signal."""

    def __init__(self, note):
        self.note, self.requested, self.signum, self._previous = note, False, 0, {}

    def __enter__(self) -> "StopSignal":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        print(self.note(), file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
