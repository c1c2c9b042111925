"""The driver's own child processes (ffprobe, the chain checks), also those run from threads.

The probes and chain checks run in threads beside Ray's start (cli.Planner). subprocess.run()
kills its child when an exception leaves it, but a signal raises in the main thread only: a
child of another thread would outlive an interrupted driver. run() records each child until it
has exited, and kill_all() (on an interrupt) ends those still running.
"""
from __future__ import annotations

import subprocess
import threading

_lock = threading.Lock()
_running: set = set()


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True, stdin=DEVNULL, **kw), the child
    recorded for kill_all() while it runs."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True, **kw) as p:
        with _lock:
            _running.add(p)
        try:
            out, err = p.communicate()
        except BaseException:
            p.kill()
            p.wait()
            raise
        finally:
            with _lock:
                _running.discard(p)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def kill_all() -> None:
    with _lock:
        ps = list(_running)
    for p in ps:
        try:
            p.kill()
        except OSError:
            pass
