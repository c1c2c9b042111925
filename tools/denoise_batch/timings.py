"""--timings: where the whole command's wall time goes, on stderr after the run.

The driver's phases (Python's start and imports, the checks, the probes, the chain checks,
Ray's import and start, the work folders, the segments, the joins and their verification, the
clean-up, Ray's shutdown) are timed on its own clock; times are seconds since the process
started (from /proc/self/stat where readable, else since this module was imported), so that the
interpreter's start is counted too. A phase run more than once (one probe per input) adds up; a
phase that ran beside another (the probes beside Ray's start) is marked so, and the total is the
wall time, not the sum. Each segment's task reports ffmpeg's wall and CPU time and when it
started and ended on the worker's wall clock (time.time(): comparable with the driver's on one
machine, offset by the clocks' difference across nodes).

Lines (one per segment, then the summary; tools/batch_overhead.sh prints the summary):
  denoise-batch: timings: segment I: submitted S s, ffmpeg A..B s (W s, U s user + Y s sys), done D s
  denoise-batch: timings: total T s; python N s, checks N s, probe N s (K ffprobe), ...
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager


def _process_age() -> float:
    """Seconds since this process started (/proc/self/stat's starttime, in clock ticks since
    boot, against CLOCK_BOOTTIME); 0.0 where unreadable."""
    try:
        with open("/proc/self/stat") as f:
            # the command name (field 2) may hold spaces: the fields after its ')' are fixed
            fields = f.read().rsplit(")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


# the process's start on the monotonic clock and on the wall clock (the workers' clock)
_T0 = time.monotonic() - _process_age()
_WALL0 = time.time() - (time.monotonic() - _T0)


def now() -> float:
    """Seconds since the process started."""
    return time.monotonic() - _T0


def from_wall(t: float) -> float:
    """A wall-clock time (time.time(), e.g. a worker's) as seconds since the process started."""
    return t - _WALL0


class Timings:
    # the summary's order; phases not run are left out
    ORDER = ("python", "checks", "probe", "chain check", "plan", "ray import", "ray start", "work folders",
             "segments", "join", "verify", "cleanup", "ray shutdown")

    def __init__(self):
        self.spans: dict[str, list[tuple[float, float]]] = {}
        self.counts: dict[str, int] = {}
        self.segments: list[dict] = []
        self.lock = threading.Lock()
        self.add("python", 0.0, now())

    def add(self, name: str, a: float, b: float) -> None:
        with self.lock:
            self.spans.setdefault(name, []).append((a, b))

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n

    @contextmanager
    def phase(self, name: str):
        a = now()
        try:
            yield
        finally:
            self.add(name, a, now())

    def segment(self, index: int, input_: str, submitted: float, done: float, result: dict | None,
                here: bool = False) -> None:
        """A segment's attempt: submitted (a Ray task) or started (`here`: run by the driver
        itself, the head start) and done, seconds since the process started."""
        with self.lock:
            self.segments.append({"index": index, "input": input_, "submitted": submitted, "done": done,
                                  "result": result or {}, "here": here})

    def seconds(self, name: str) -> float:
        return sum(b - a for a, b in self.spans.get(name, []))

    def _beside(self, name: str) -> list[str]:
        """The other phases that ran at the same time as `name`, at least 10 ms of it."""
        out = []
        for other, spans in self.spans.items():
            if other == name:
                continue
            overlap = sum(max(0.0, min(b, d) - max(a, c)) for a, b in self.spans[name] for c, d in spans)
            if overlap >= 0.01:
                out.append(other)
        return out

    def segment_lines(self) -> list[str]:
        lines = []
        for s in sorted(self.segments, key=lambda s: (s["submitted"], s["index"])):
            r = s["result"]
            several = len({x["input"] for x in self.segments}) > 1
            name = f"segment {s['index']}" + (f" of {s['input']}" if several else "")
            start = ("run by the driver from" if s["here"] else "submitted") + f" {s['submitted']:.2f} s"
            text = f"denoise-batch: timings: {name}: {start}"
            if "wall_start" in r:
                text += (f", ffmpeg {from_wall(r['wall_start']):.2f}..{from_wall(r['wall_end']):.2f} s "
                         f"({r['seconds']:.2f} s, {r['cpu_user']:.1f} s user + {r['cpu_sys']:.1f} s sys)")
            text += f", done {s['done']:.2f} s"
            lines.append(text)
        return lines

    def summary(self) -> str:
        if self.segments and "segments" not in self.spans:
            # from the first task's submission to the last task's result reaching the driver
            self.add("segments", min(s["submitted"] for s in self.segments),
                     max(s["done"] for s in self.segments))
        parts = []
        for name in self.ORDER:
            if name not in self.spans:
                continue
            text = f"{name} {self.seconds(name):.2f} s"
            notes = []
            if name == "probe" and self.counts.get("ffprobe"):
                notes.append(f"{self.counts['ffprobe']} ffprobe")
            if name == "verify" and self.counts.get("verify ffprobe"):
                notes.append(f"{self.counts['verify ffprobe']} ffprobe")
            if name == "segments" and self.segments:
                notes.append(self._segments_note())
            beside = [b for b in self._beside(name) if b != "python"]
            if beside:
                notes.append("beside " + ", ".join(beside))
            if notes:
                text += " (" + "; ".join(notes) + ")"
            parts.append(text)
        return f"denoise-batch: timings: total {now():.2f} s; " + ", ".join(parts)

    def _segments_note(self) -> str:
        rs = [s["result"] for s in self.segments if "wall_start" in s["result"]]
        n = len(self.segments)
        here = sum(1 for s in self.segments if s["here"])
        what = f"{n} tasks" + (f", {here} of them run by the driver while Ray started" if here else "")
        if not rs:
            return what
        wall = sum(r["seconds"] for r in rs)
        user, sys_ = sum(r["cpu_user"] for r in rs), sum(r["cpu_sys"] for r in rs)
        first = min(from_wall(r["wall_start"]) for r in rs)
        last = max(from_wall(r["wall_end"]) for r in rs)
        start = min(s["submitted"] for s in self.segments)
        return (f"{what}, first ffmpeg {first - start:.2f} s after the first submission; ffmpeg "
                f"{first:.2f}..{last:.2f} s, {wall:.2f} s summed, {user:.1f} s user + {sys_:.1f} s sys")

    def print(self, stream=None) -> None:
        stream = stream or sys.stderr
        for line in self.segment_lines():
            print(line, file=stream)
        print(self.summary(), file=stream, flush=True)
