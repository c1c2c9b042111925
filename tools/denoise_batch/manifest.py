"""The work folder's manifest: the job's parameters, its segments and which of them are done.

manifest.json is written only by the driver, always whole (a temporary file renamed over it), so
a run killed at any moment leaves the last complete state. A segment counts as done when the
manifest says so and its file exists: its file appears only complete (segment.py), and the
manifest records it after the worker has returned. A rerun with the same input (path, size,
modification time) and the same parameters continues with the segments not done; anything else
starts the work folder afresh.
"""
from __future__ import annotations

import glob
import json
import os

VERSION = 1


def path(work: str) -> str:
    return os.path.join(work, "manifest.json")


def identity(input_path: str, params: dict) -> dict:
    st = os.stat(input_path)
    return {"input": os.path.abspath(input_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "params": params}


def load(work: str) -> dict | None:
    try:
        with open(path(work)) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("version") == VERSION else None


def save(work: str, m: dict) -> None:
    tmp = path(work) + f".tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(m, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path(work))


def done(work: str, m: dict) -> set[int]:
    return {s["index"] for s in m["segments"]
            if s.get("done") and os.path.exists(os.path.join(work, s["file"]))}


def remove_attempts(work: str) -> int:
    """Remove the files of unfinished attempts (seg-NNNNN.attempt-TAG.EXT, segment.py): left by
    an attempt whose worker or driver was killed. Only while no task of the work folder runs:
    when the driver starts a job, and after it has stopped Ray on an interrupt. Returns how many."""
    n = 0
    for f in glob.glob(os.path.join(work, "seg-*.attempt-*")):
        try:
            os.unlink(f)
            n += 1
        except FileNotFoundError:
            pass
    return n


def clear(work: str) -> None:
    """Remove what an earlier job left in the work folder (its segments, logs, manifest)."""
    for f in glob.glob(os.path.join(work, "seg-*")) + [path(work), os.path.join(work, "concat.txt")]:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
