"""The progress line of the whole job on stderr: frames done of all, frames/s, ETA, segments.

On a terminal the line is redrawn in place (at most twice a second); otherwise (a log, CI) a
line is written every `interval` seconds. Frames/s counts the frames output in this run, so a
resumed run's rate is not inflated by the segments an earlier run did.
"""
from __future__ import annotations

import sys
import time


def _clock(s: float) -> str:
    s = int(s + 0.5)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, already: int, segments: int, quiet: bool = False,
                 interval: float = 10.0, stream=None, start: float | None = None):
        """start: when the job's first segment started (time.monotonic()), default now."""
        self.total, self.already, self.segments = total, already, segments
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = 0.5 if self.tty else interval
        self.t0 = time.monotonic() if start is None else start
        self.last = 0.0
        self.width = 0
        self.text = ""

    def line(self, done: int, segs_done: int, running: int) -> str:
        el = time.monotonic() - self.t0
        fps = (done - self.already) / el if el > 0 else 0.0
        pct = 100.0 * done / self.total if self.total else 100.0
        eta = _clock((self.total - done) / fps) if fps > 0 else "?"
        return (f"denoise-batch: {done}/{self.total} frames ({pct:.1f}%), {fps:.2f} frames/s, "
                f"ETA {eta}, elapsed {_clock(el)}; segments {segs_done}/{self.segments} done, "
                f"{running} submitted")

    def update(self, done: int, segs_done: int, running: int, force: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or (not force and now - self.last < self.interval):
            return
        self.last = now
        text = self.line(done, segs_done, running)
        if force and text == self.text:
            return
        self.text = text
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A line of its own (a failure, a finished file), not overwritten by the progress line."""
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def close_line(self) -> None:
        """End a line redrawn in place, so that the caller's next line starts on its own."""
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def close(self, done: int, segs_done: int) -> None:
        self.update(done, segs_done, 0, force=True)
        if self.tty and not self.quiet:
            self.stream.write("\n")
            self.width = 0
