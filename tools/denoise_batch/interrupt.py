"""SIGINT, SIGTERM and SIGHUP on the driver: one exception, Interrupted, raised where it is safe.

Raised from a signal handler, an exception surfaces wherever the main thread is; inside Ray's
compiled calls (ray.wait, ray.get) it comes out as a SystemError with a stack from Ray's
internals. Within `deferred()` the handler only records the signal, and Interrupted is raised
when the block ends; elsewhere (waiting for the planner or for Ray's start, a join) it is raised
at once, and a running subprocess.run() kills its child on the way out. The driver's other
threads (the planner's probes, the head start's runs, Ray's start and stop: cli.py, schedule.py)
never see it: the main thread's clean-up ends their work (children.kill_all, LocalRun.kill) and
lets Ray's start finish before stopping it.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager

_depth = 0
_pending: int | None = None


class Interrupted(BaseException):
    """Like KeyboardInterrupt, not an Exception: no "except Exception" takes it for a failure."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """The shell's convention for a command ended by signal N: 128 + N."""
        return 128 + self.signum


def _handler(signum, frame) -> None:
    global _pending
    if _depth:
        _pending = signum
        return
    raise Interrupted(signum)


def install() -> None:
    """Catch SIGINT, SIGTERM and SIGHUP, except those ignored when the program started (a
    background job's SIGINT, nohup's SIGHUP). Call again after Ray's start: Ray's core worker
    may set a C++ handler for SIGTERM (its stack dump on a crash)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _handler)


def ignore() -> None:
    """Ignore further signals (during the clean-up after the first)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is _handler:
            signal.signal(sig, signal.SIG_IGN)


@contextmanager
def deferred():
    """Within the block a signal is recorded; Interrupted is raised when the block ends."""
    global _depth, _pending
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending is not None:
            signum, _pending = _pending, None
            raise Interrupted(signum)
