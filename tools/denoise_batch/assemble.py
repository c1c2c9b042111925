"""Concatenate a job's segments without re-encoding, add the source's other streams once, check
the result against the source, and only then put it in place of OUTPUT.

The concat demuxer (stream copy) joins the segments; each file's `duration` line is the exact
span of its frames in the source (the next segment's first pts minus its own), so the joined
timestamps follow the source's, variable frame rates included. Audio, subtitles (and, in
Matroska, attachments) are mapped from the source with -c copy unless encoder options for them
were given. The result is written beside OUTPUT under a hidden name and renamed over OUTPUT
after the checks: its video frame count and every frame's pts (relative to the first) must match
the source's within one tick of the coarser time base.
"""
from __future__ import annotations

import os
import subprocess

from denoise_batch import plan


class AssembleError(RuntimeError):
    pass


def partial_path(output: str) -> str:
    d, base = os.path.split(os.path.abspath(output))
    stem, ext = os.path.splitext(base)
    return os.path.join(d, f".{stem}.partial{ext}")


def concat_list(job: dict, src: plan.Source) -> str:
    lines = ["ffconcat version 1.0"]
    for s in job["segments"]:
        lines.append(f"file '{s['file']}'")
        if s["last"] + 1 < src.frames:
            lines.append("duration %.6f" % (src.seconds(s["last"] + 1) - src.seconds(s["first"])))
    p = os.path.join(job["work"], "concat.txt")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    return p


def assemble(job: dict, src: plan.Source, ffprobe: str) -> None:
    output = job["output"]
    partial = partial_path(output)
    lst = concat_list(job, src)
    offset = src.seconds(0) - src.start_time
    cmd = [job["ffmpeg"], "-nostdin", "-hide_banner", "-nostats", "-v", "error", "-y"]
    if abs(offset) >= 1e-6:
        cmd += ["-itsoffset", "%.6f" % offset]
    cmd += ["-f", "concat", "-safe", "0", "-i", lst, "-i", job["input"], "-map", "0:v"]
    if job["audio"]:
        cmd += ["-map", "1:a?"]
    if job["subtitles"]:
        cmd += ["-map", "1:s?"]
        if os.path.splitext(output)[1].lower() in (".mkv", ".mka", ".webm"):
            cmd += ["-map", "1:t?"]
    cmd += ["-c", "copy", "-map_metadata", "1", "-map_chapters", "1"]
    cmd += job["mux_options"]
    cmd += [partial]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        if r.returncode != 0:
            raise AssembleError("joining the segments failed: " +
                                " | ".join(r.stderr.strip().splitlines()[-3:]))
        verify(src, partial, ffprobe)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def verify(src: plan.Source, result: str, ffprobe: str) -> None:
    """The result's video frames: the source's count, and the same pts relative to the first."""
    try:
        got = plan.probe(ffprobe, result)
    except plan.ProbeError as e:
        raise AssembleError(f"the joined file cannot be read: {e}") from e
    if got.frames != src.frames:
        raise AssembleError(f"the joined file has {got.frames} video frames, the source {src.frames}")
    tol = float(max(src.time_base, got.time_base)) + 1e-6
    base_s, base_g = src.seconds(0), got.seconds(0)
    for i in range(src.frames):
        d = (got.seconds(i) - base_g) - (src.seconds(i) - base_s)
        if abs(d) > tol:
            raise AssembleError(f"frame {i}: pts {got.seconds(i) - base_g:.6f} s in the joined file, "
                                f"{src.seconds(i) - base_s:.6f} s in the source")
