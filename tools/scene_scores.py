#!/usr/bin/env python3
"""Scene-cut scores of the filter's built-in detector on whole clips, without running the network.

    python3 tools/scene_scores.py [--size WxH] [--block N|auto] [--threshold 10] CLIP...
    python3 tools/scene_scores.py --cuts [--size WxH] [--block N|auto] CLIP...

A numpy copy of the engine's scene-cut score (kernels/frame_scan.cpp, denoise_scene_cut()) for
8-bit limited-range Y'CbCr input: the clip is decoded (and scaled with FFmpeg's scale filter,
bicubic, to --size) to yuv420p by build/bin/ffmpeg; Y' normalised and times the luma gain 255/219
of the decoding matrix; means over B x B blocks (--block auto: the engine's
SceneScore::block_size(), max(8, round(sqrt(w h / 960))); a number: a fixed block, 8 being the
detector's old one); mafd = sum over blocks of pixels x |mean - previous mean| / (w h) in percent;
score = min(mafd, |mafd - previous mafd|) (FFmpeg's vf_scdet.c), the first pair against a
previous mafd of 0. The filter's own scores (-v trace, "scene score") on the sample clips match
these to the printed digits.
Per clip: the first pair's score, the highest after it, how many pairs reach the threshold (in a
single shot: cuts that should not be). --cuts: every ordered pair of clips A, B as a hard cut from
A's sixth frame to B's first, with A's last mafd as the previous one: the scores a real cut gets.
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FFMPEG = os.path.join(ROOT, "build", "bin", "ffmpeg")
FFPROBE = os.path.join(ROOT, "build", "bin", "ffprobe")


def clip_size(path):
    out = subprocess.run([FFPROBE, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                          "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout
    w, h = out.strip().split(",")[:2]
    return int(w), int(h)


def luma_frames(path, size, max_frames):
    """Y' of each frame in R'G'B' units (normalised code value x 255/219)."""
    w, h = size if size else clip_size(path)
    vf = (f"scale={w}:{h}," if size else "") + "format=yuv420p"
    p = subprocess.Popen([FFMPEG, "-nostdin", "-v", "error", "-i", path, "-vf", vf, "-frames:v", str(max_frames),
                          "-f", "rawvideo", "-pix_fmt", "yuv420p", "pipe:1"], stdout=subprocess.PIPE)
    n = w * h
    frame = n + 2 * ((w + 1) // 2) * ((h + 1) // 2)
    while True:
        b = p.stdout.read(frame)
        if len(b) < frame:
            break
        yield np.frombuffer(b[:n], np.uint8).reshape(h, w) * (1.0 / 219.0)
    p.wait()


def block_size(w, h, block):
    return max(8, int(round(math.sqrt(w * h / 960.0)))) if block == "auto" else int(block)


def block_means(y, B):
    """(means, pixel counts) over B x B blocks, the last row/column of blocks partial."""
    h, w = y.shape
    bh, bw = -(-h // B), -(-w // B)
    yp = np.pad(y, ((0, bh * B - h), (0, bw * B - w)))
    cp = np.pad(np.ones_like(y), ((0, bh * B - h), (0, bw * B - w)))
    s = yp.reshape(bh, B, bw, B).sum((1, 3))
    c = cp.reshape(bh, B, bw, B).sum((1, 3))
    return s / c, c


def mafd(a, b, count, npix):
    return float((count * np.abs(a - b)).sum() * 100.0 / npix)


def clip_scores(path, size, block, max_frames=100000):
    prev, prev_mafd, scores = None, 0.0, []
    for y in luma_frames(path, size, max_frames):
        m, c = block_means(y, block_size(y.shape[1], y.shape[0], block))
        if prev is not None:
            d = mafd(m, prev, c, y.size)
            scores.append(min(d, abs(d - prev_mafd)))
            prev_mafd = d
        prev = m
    return scores


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("clips", nargs="+")
    ap.add_argument("--size", help="scale every clip to WxH first (default: its own size)")
    ap.add_argument("--block", default="auto", help="block side in pixels, or auto (the filter's rule)")
    ap.add_argument("--threshold", type=float, default=10.0, help="the filter's scene option (default 10)")
    ap.add_argument("--cuts", action="store_true", help="score hard cuts between every ordered pair of clips")
    a = ap.parse_args()
    size = tuple(int(v) for v in a.size.split("x")) if a.size else None
    if not a.cuts:
        for path in a.clips:
            s = clip_scores(path, size, a.block)
            rest = max(s[1:]) if len(s) > 1 else 0.0
            print(f"{os.path.basename(path):32s} frames {len(s) + 1:4d}  first pair {s[0]:6.2f}  highest after it "
                  f"{rest:6.2f}  pairs >= {a.threshold:g}: {sum(v >= a.threshold for v in s)}")
        return
    ends = []
    for path in a.clips:
        fr = list(luma_frames(path, size, 6))
        B = block_size(fr[0].shape[1], fr[0].shape[0], a.block)
        ms = [block_means(y, B) for y in fr]
        ends.append((ms[0][0], ms[-1][0], mafd(ms[-1][0], ms[-2][0], ms[0][1], fr[0].size), ms[0][1], fr[0].size))
    scores = []
    for i, (_, last, last_mafd, count, npix) in enumerate(ends):
        for j, (first, _, _, _, _) in enumerate(ends):
            if i != j:
                d = mafd(first, last, count, npix)
                scores.append(min(d, abs(d - last_mafd)))
    s = np.array(scores)
    print(f"{len(s)} cuts: score min {s.min():.2f}, 5th percentile {np.percentile(s, 5):.2f}, median "
          f"{np.median(s):.2f}; below {a.threshold:g} (missed): {int((s < a.threshold).sum())}")


if __name__ == "__main__":
    sys.exit(main())
