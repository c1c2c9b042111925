"""Probe an input's video stream and split it into segments.

The frames are the video stream's packets (ffprobe -show_packets: no decoding, so a two-hour
film is probed in seconds), in presentation order by pts; a packet flagged K is a keyframe,
where decoding can start. Packets flagged D (discard) are not frames. Each segment is a range
of frames [first, last]; its run decodes from the last keyframe at or before first - before
(the leading context), feeds frames first - before .. last + after to the chain and keeps
first .. last. Trims are placed by time, halfway between neighbouring frames' pts, so that they
select exactly those frames whatever the time base and whatever rounding a seconds value gets.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from fractions import Fraction

from denoise_batch import children


class ProbeError(RuntimeError):
    pass


# ffprobe runs so far in this process (for --timings)
ffprobe_runs = 0


@dataclass
class Source:
    path: str
    time_base: Fraction
    start_time: float          # the container's start time in seconds (ffmpeg's -ss is relative to it)
    pts: list[int]             # frame pts in time_base, presentation order
    keyframes: list[int]       # frame indices of keyframes, increasing
    format_name: str = ""
    codec_name: str = ""
    avg_frame_rate: Fraction | None = None  # the stream's frame rate as the container states it, if any
    r_frame_rate: Fraction | None = None    # the lowest rate all timestamps fit (FFmpeg's guess)

    @property
    def frames(self) -> int:
        return len(self.pts)

    def seconds(self, i: int) -> float:
        return float(self.pts[i] * self.time_base)

    def between(self, i: int) -> float:
        """A time halfway between frame i and frame i + 1 (seconds)."""
        return float(Fraction(self.pts[i] + self.pts[i + 1], 2) * self.time_base)


def _run_json(cmd: list[str], what: str) -> dict:
    global ffprobe_runs
    ffprobe_runs += 1
    try:
        r = children.run(cmd)
    except OSError as e:
        raise ProbeError(f"cannot run {cmd[0]}: {e}") from e
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        # ffprobe names the file first ("PATH: No such file or directory"); the caller names it
        if msg.startswith(cmd[-1] + ": "):
            msg = msg[len(cmd[-1]) + 2:]
        raise ProbeError(f"{what}: {msg}")
    try:
        return json.loads(r.stdout or "{}")
    except json.JSONDecodeError as e:
        raise ProbeError(f"{what}: unreadable ffprobe output ({e})") from e


def probe(ffprobe: str, path: str) -> Source:
    """The first video stream's frames and keyframes. ProbeError says why a file cannot be used.

    One ffprobe run (each costs the start of a process that loads the build's libraries, the
    CUDA engine's among them: a few tenths of a second): the container, the first video stream
    (-select_streams v:0, the stream the segments map) and its packets."""
    info = _run_json([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                      "format=format_name,start_time:stream=index,codec_type,codec_name,time_base,"
                      "avg_frame_rate,r_frame_rate:packet=pts,flags",
                      "-of", "json", path], "cannot read the file")
    video = [s for s in info.get("streams", []) if s.get("codec_type") == "video"]
    if not video:
        raise ProbeError("no video stream")
    v = video[0]
    tb = _rational(v.get("time_base"))
    if not tb:
        raise ProbeError(f"video stream has no time base ({v.get('time_base')})")
    fmt = info.get("format", {})
    try:
        start = float(fmt.get("start_time", "0"))
    except ValueError:
        start = 0.0
    frames = []
    for p in info.get("packets", []):
        flags = p.get("flags", "")
        if "D" in flags:
            continue
        if "pts" not in p:
            raise ProbeError("video packets without pts (a raw elementary stream?): remux it into "
                             "a container first, e.g. ffmpeg -i IN -c copy IN.mkv")
        frames.append((int(p["pts"]), "K" in flags))
    if not frames:
        raise ProbeError("no video frames")
    frames.sort()
    pts = [p for p, _ in frames]
    if any(a == b for a, b in zip(pts, pts[1:])):
        raise ProbeError("video frames with equal pts: cannot place cuts by time")
    keys = [i for i, (_, k) in enumerate(frames) if k]
    if not keys:
        raise ProbeError("no keyframe in the video stream")
    return Source(path=path, time_base=tb, start_time=start, pts=pts, keyframes=keys,
                  format_name=fmt.get("format_name", ""), codec_name=v.get("codec_name", ""),
                  avg_frame_rate=_rational(v.get("avg_frame_rate")),
                  r_frame_rate=_rational(v.get("r_frame_rate")))


def _rational(text) -> Fraction | None:
    """ffprobe's "num/den" as a Fraction; None for a missing, zero or undefined one ("0/0")."""
    num, _, den = str(text or "").partition("/")
    try:
        q = Fraction(int(num), int(den or 1))
    except (ValueError, ZeroDivisionError):
        return None
    return q if q > 0 else None


@dataclass
class Segment:
    index: int
    first: int                 # first frame kept
    last: int                  # last frame kept
    ctx_first: int             # first frame fed to the chain
    ctx_last: int              # last frame fed to the chain
    keyframe: int              # where decoding starts

    @property
    def frames(self) -> int:
        return self.last - self.first + 1

    def to_json(self) -> dict:
        return dict(index=self.index, first=self.first, last=self.last, ctx_first=self.ctx_first,
                    ctx_last=self.ctx_last, keyframe=self.keyframe)


def split(src: Source, target: int, before: int, after: int) -> list[Segment]:
    """Segments of about `target` frames. A cut is placed, where one is within half a target of
    the aim, at keyframe + before, so that decoding starts exactly at the keyframe and decodes no
    frame it throws away; otherwise at the aim (decoding then starts at the keyframe before)."""
    n = src.frames
    target = max(1, target)
    cuts = [k + before for k in src.keyframes if 0 < k + before < n]
    bounds, pos = [0], 0
    while n - pos >= target + max(1, target // 2):
        aim = pos + target
        lo = bisect.bisect_right(cuts, pos + max(1, target // 2) - 1)
        hi = bisect.bisect_right(cuts, pos + target + target // 2)
        near = cuts[lo:hi]
        cut = min(near, key=lambda c: (abs(c - aim), c)) if near else aim
        bounds.append(cut)
        pos = cut
    bounds.append(n)
    segs = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        cf, cl = max(0, a - before), min(n - 1, b - 1 + after)
        k = bisect.bisect_right(src.keyframes, cf) - 1
        key = src.keyframes[k] if k >= 0 else 0
        segs.append(Segment(i, a, b - 1, cf, cl, key))
    return segs


def trims(src: Source, seg: Segment) -> tuple[str, str]:
    """(trim in front of the chain, trim behind it): the frames fed and the frames kept."""
    def trim(a: int, b: int) -> str:
        opts = []
        if a > 0:
            opts.append("start=%.6f" % src.between(a - 1))
        if b < src.frames - 1:
            opts.append("end=%.6f" % src.between(b))
        return "trim=" + ":".join(opts) if opts else "null"
    return trim(seg.ctx_first, seg.ctx_last), trim(seg.first, seg.last)


def seek(src: Source, seg: Segment) -> float | None:
    """ffmpeg's input -ss (seconds from the container's start) that lands on the segment's
    keyframe, or None to decode from the start: a quarter of a frame past the keyframe, so that
    rounding cannot make the demuxer land on the keyframe before."""
    k = seg.keyframe
    if k <= src.keyframes[0]:
        return None
    gap = src.seconds(k + 1) - src.seconds(k) if k + 1 < src.frames else 0.001
    return src.seconds(k) + gap / 4 - src.start_time
