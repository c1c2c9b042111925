"""Concatenate a job's segments without re-encoding, add the source's other streams once, check
the result against the source, and only then put it in place of OUTPUT.

The concat demuxer (stream copy) joins the segments; each file's `duration` line is the exact
span of its frames in the source (the next segment's first pts minus its own), so the joined
timestamps follow the source's, variable frame rates included. Audio, subtitles (and, in
Matroska, attachments) are mapped from the source with -c copy unless encoder options for them
were given. The result is written beside OUTPUT under a hidden name and renamed over OUTPUT
after the checks: its video frame count and every frame's pts (relative to the first) must match
the source's within one tick of the coarser time base, and its stated frame rate the source's.
"""
from __future__ import annotations

import os
import subprocess
from contextlib import nullcontext

from denoise_batch import plan


class AssembleError(RuntimeError):
    pass


def partial_path(output: str) -> str:
    d, base = os.path.split(os.path.abspath(output))
    stem, ext = os.path.splitext(base)
    return os.path.join(d, f".{stem}.partial{ext}")


def concat_text(segments: list[dict], src: plan.Source) -> str:
    """The concat demuxer's list: each segment's file and the span of its frames in the source."""
    lines = ["ffconcat version 1.0"]
    for s in segments:
        lines.append(f"file '{s['file']}'")
        if s["last"] + 1 < src.frames:
            lines.append("duration %.6f" % (src.seconds(s["last"] + 1) - src.seconds(s["first"])))
    return "\n".join(lines) + "\n"


def concat_path(job: dict) -> str:
    return os.path.join(job["work"], "concat.txt")


def join_command(job: dict, src: plan.Source, concat: str, output: str) -> list[str]:
    """The ffmpeg command line that joins the segments listed in `concat` into `output`.

    The video stream is stated at the source's frame rate and time base (-r, -time_base with
    -c copy change no frame): the concat demuxer would take them from the first segment, whose
    few frames (or one) make FFmpeg guess a rate from the time base (1000/1 in Matroska)."""
    offset = src.seconds(0) - src.start_time
    cmd = [job["ffmpeg"], "-nostdin", "-hide_banner", "-nostats", "-v", "error", "-y"]
    if abs(offset) >= 1e-6:
        cmd += ["-itsoffset", "%.6f" % offset]
    cmd += ["-f", "concat", "-safe", "0", "-i", concat, "-i", job["input"], "-map", "0:v"]
    if job["audio"]:
        cmd += ["-map", "1:a?"]
    if job["subtitles"]:
        cmd += ["-map", "1:s?"]
        if os.path.splitext(job["output"])[1].lower() in (".mkv", ".mka", ".webm"):
            cmd += ["-map", "1:t?"]
    cmd += ["-c", "copy", "-map_metadata", "1", "-map_chapters", "1"]
    if src.avg_frame_rate:
        cmd += ["-r:v", _q(src.avg_frame_rate)]
    cmd += ["-time_base:v", _q(src.time_base)]
    cmd += job["mux_options"]
    cmd += [output]
    return cmd


def _q(q) -> str:
    return f"{q.numerator}/{q.denominator}"


def assemble(job: dict, src: plan.Source, ffprobe: str, timings=None) -> None:
    """Join, verify, put in place. `timings` (timings.Timings, for --timings) gets the phases
    join and verify."""
    def phase(name):
        return timings.phase(name) if timings else nullcontext()
    output = job["output"]
    partial = partial_path(output)
    lst = concat_path(job)
    try:
        with phase("join"):
            with open(lst, "w") as f:
                f.write(concat_text(job["segments"], src))
            r = subprocess.run(join_command(job, src, lst, partial), capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, check=False)
        if r.returncode != 0:
            raise AssembleError("joining the segments failed: " +
                                " | ".join(r.stderr.strip().splitlines()[-3:]))
        runs = plan.ffprobe_runs
        with phase("verify"):
            verify(src, partial, ffprobe)
        if timings:
            timings.count("verify ffprobe", plan.ffprobe_runs - runs)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def verify(src: plan.Source, result: str, ffprobe: str) -> None:
    """The result's video frames: the source's count, frame rate (where the source states one) and
    the same pts relative to the first."""
    try:
        got = plan.probe(ffprobe, result)
    except plan.ProbeError as e:
        raise AssembleError(f"the joined file cannot be read: {e}") from e
    if got.frames != src.frames:
        raise AssembleError(f"the joined file has {got.frames} video frames, the source {src.frames}")
    # (within 0.1 %: Matroska stores the rate as a frame duration in ns, read back as a fraction)
    if src.avg_frame_rate and (not got.avg_frame_rate or
                               abs(got.avg_frame_rate / src.avg_frame_rate - 1) > 1e-3):
        raise AssembleError(f"the joined file's frame rate is {got.avg_frame_rate}, the source's "
                            f"{src.avg_frame_rate}")
    tol = float(max(src.time_base, got.time_base)) + 1e-6
    base_s, base_g = src.seconds(0), got.seconds(0)
    for i in range(src.frames):
        d = (got.seconds(i) - base_g) - (src.seconds(i) - base_s)
        if abs(d) > tol:
            raise AssembleError(f"frame {i}: pts {got.seconds(i) - base_g:.6f} s in the joined file, "
                                f"{src.seconds(i) - base_s:.6f} s in the source")
