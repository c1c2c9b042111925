"""Checks that run on the driver before Ray starts: each input can be read, each output and work
folder can be written, and the filter chain keeps the frames of the input's first frames one
for one with their pts (what the segment trims rely on).

Each check returns None when it passes, else the reason as a phrase that does not repeat the
path it is about (the caller names it): "no such file", "not a folder: ...", ...
"""
from __future__ import annotations

import os
import tempfile
from fractions import Fraction

from denoise_batch import chain as chainmod
from denoise_batch import children, plan, segment

# frames of an input the chain check runs on: enough for filters that drop or add a frame every
# few (fps, decimate's cycle of 5, select by n), few enough to take well under a second
CHECK_FRAMES = 24


def input_problem(path: str) -> str | None:
    """Why `path` cannot be read as an input file, or None."""
    if not os.path.lexists(path):
        return "no such file"
    if os.path.isdir(path):
        return "is a folder, not a video file"
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    return None


def folder_problem(folder: str) -> str | None:
    """Why files cannot be written in `folder` (created later where missing), or None. An
    existing folder is checked by creating and removing a file in it (os.access says yes to
    root, also on a read-only mount); a missing one by its nearest existing parent."""
    folder = os.path.abspath(folder)
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            return f"{folder} is a file, not a folder"
        try:
            fd, probe = tempfile.mkstemp(prefix=".denoise-batch-check-", dir=folder)
        except OSError as e:
            return f"cannot write in {folder}: {e.strerror or e}"
        os.close(fd)
        os.unlink(probe)
        return None
    parent = os.path.dirname(folder)
    if parent == folder:
        return f"{folder} does not exist"
    return folder_problem(parent)


def chain_command(ffmpeg: str, path: str, chain: str) -> list[str]:
    """The chain check's ffmpeg command: the chain, its denoise filter replaced by null (no
    model, no GPU: the rest of the chain's frame structure), over the input's first CHECK_FRAMES
    decoded frames (trim by frame count: the command needs no probe, so it runs beside it),
    writing framemd5 of wrapped frames: each frame's pts without pixel work (the minimal FFmpeg
    build has framemd5, not framecrc)."""
    graph = f"trim=end_frame={CHECK_FRAMES}," + chainmod.without_denoise(chain)
    return [ffmpeg, "-nostdin", "-hide_banner", "-nostats", "-v", "error", "-copyts", "-i", path,
            "-map", "0:v:0", "-an", "-sn", "-dn", "-vf", graph, "-fps_mode", "passthrough",
            "-enc_time_base:v", "demux", "-c:v", "wrapped_avframe", "-f", "framemd5", "pipe:1"]


def chain_run(ffmpeg: str, path: str, chain: str):
    """Run chain_command(); the CompletedProcess, or the reason it could not run (a str)."""
    try:
        return children.run(chain_command(ffmpeg, path, chain))
    except OSError as e:
        return f"cannot run {ffmpeg}: {e.strerror or e}"


def chain_problem(ffmpeg: str, src: plan.Source, chain: str, ran=None) -> str | None:
    """Whether the chain outputs the input's first CHECK_FRAMES frames one for one with their
    pts, as the segment trims need (docs/scale-out.md, "Bit-exactness"). `ran`: chain_run()'s
    result where the caller ran it already (beside the probe), else it runs here. A filter that
    changes the frame count or the pts (fps, select, tpad, setpts, reverse, a graph with a second
    input) fails here, once per input, instead of in every segment."""
    n = min(src.frames, CHECK_FRAMES)
    r = chain_run(ffmpeg, src.path, chain) if ran is None else ran
    if isinstance(r, str):
        return r
    if r.returncode != 0:
        # the same run without the chain tells a file that does not decode from a chain that fails
        cmd = r.args
        plain = children.run(cmd[:cmd.index("-vf")] + ["-frames:v", str(n), "-f", "null", "-"])
        if plain.returncode != 0:
            return f"its first frames cannot be decoded: {segment.ffmpeg_reason(plain.stderr, 2)}"
        why = segment.ffmpeg_reason(r.stderr, 2)
        if why == segment.NO_MESSAGE:
            why = (f"killed by signal {-r.returncode}" if r.returncode < 0
                   else f"exit status {r.returncode}, no message")
        return (f"the filter chain fails on its first {n} frames (denoise-batch runs a linear chain "
                f"with one input and one output): {why}")
    pts, tb = [], src.time_base
    for line in r.stdout.splitlines():
        if line.startswith("#tb 0:"):
            tb = Fraction(line.split(":", 1)[1].strip())
        if line.startswith("#") or not line.strip():
            continue
        try:
            # in the source's time base (framemd5 writes the muxer's, normally the same)
            pts.append(Fraction(int(line.split(",")[2])) * tb / src.time_base)
        except (IndexError, ValueError, ZeroDivisionError):
            return f"unreadable framemd5 line from ffmpeg: {line}"
    if pts != src.pts[:n]:
        return (f"the filter chain {chain} gives {len(pts)} frames for its first {n} frames"
                + ("" if len(pts) != n else " with other timestamps")
                + ": denoise-batch cuts segments by pts and needs each filter to pass one frame out "
                  "per frame in, with its pts (no fps, select, setpts, tpad, ...: apply those before "
                  "or after denoise-batch)")
    return None
